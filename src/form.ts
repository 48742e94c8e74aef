/**
 * The submit form's logic, free of React: values from a template's parameters, checks as the
 * user types, the body sent to the server and the mapping of the server's field errors.
 */

import { listedValues } from './sweepForm';
import { ITemplateInfo, ITemplateParam, ITemplateSubmission } from './models';
import { validateName } from './names';

// What the form's callers and tests know it by.
export { validateName } from './names';
export { nextName, prefillFromJob, shellQuote } from './resubmit';

/** What an input holds: text for text-like inputs, a flag for checkboxes. */
export type FieldValue = string | boolean;

export interface IFormState {
  template: string;
  name: string;
  values: Record<string, FieldValue>;
  /**
   * The parameters the user (or a prefill) set: only these are sent, so that the template's and
   * the config file's defaults apply to the others. Undefined: every non-empty value is sent.
   */
  given?: string[];
  /** Spec fields kept from the job being resubmitted (launcher, workdir, kind...). */
  overrides?: Record<string, unknown>;
  /** Run after these jobs (a chain, #24): sent as the spec's `after`. */
  after?: string[];
  /** With after: start once they ended, whatever their state. */
  afterAny?: boolean;
}

/** The field of the job name, next to the template's parameters. */
export const NAME_FIELD = 'name';
/** The "Run after" field (the spec's `after`: a chain's jobs it waits for). */
export const AFTER_FIELD = 'after';

/** The order of the form's sections. */
export const GROUP_ORDER = ['job', 'resources', 'training', 'advanced'];

export const GROUP_TITLES: Record<string, string> = {
  job: 'Job',
  resources: 'Resources',
  training: 'Training',
  advanced: 'Advanced'
};

/** A parameter's value as the input shows it. */
export function toFieldValue(
  param: ITemplateParam,
  value: unknown
): FieldValue {
  if (param.type === 'boolean') {
    return value === true || value === 'true';
  }
  if (value === null || value === undefined) {
    return '';
  }
  if (Array.isArray(value)) {
    return value.join(' ');
  }
  if (typeof value === 'object') {
    return Object.entries(value as Record<string, unknown>)
      .map(([k, v]) => `${k}=${v}`)
      .join('\n');
  }
  return String(value);
}

/** The form's values for a template, from its defaults and then from `prefill`. */
export function initialValues(
  template: ITemplateInfo,
  prefill: Record<string, unknown> = {}
): Record<string, FieldValue> {
  const values: Record<string, FieldValue> = {};
  for (const param of template.params) {
    const given = Object.prototype.hasOwnProperty.call(prefill, param.name);
    values[param.name] = toFieldValue(
      param,
      given ? prefill[param.name] : param.default
    );
  }
  return values;
}

/** The parameters a prefill sets (those with a value: null leaves the default). */
export function givenParams(
  template: ITemplateInfo,
  prefill: Record<string, unknown> = {}
): string[] {
  return template.params
    .filter(
      param =>
        Object.prototype.hasOwnProperty.call(prefill, param.name) &&
        prefill[param.name] !== null &&
        prefill[param.name] !== undefined &&
        prefill[param.name] !== ''
    )
    .map(param => param.name);
}

/** What an untouched field shows: the value the server says the job will use. */
export function effectiveText(
  param: ITemplateParam,
  values: Record<string, unknown> | undefined
): string {
  const value = values?.[param.name];
  if (value === null || value === undefined || value === '') {
    return '';
  }
  return String(toFieldValue(param, value));
}

/** Params grouped in form order; unknown groups go before "advanced". */
export function groupParams(
  params: ITemplateParam[]
): { group: string; title: string; params: ITemplateParam[] }[] {
  const groups = new Map<string, ITemplateParam[]>();
  for (const param of params) {
    const group = param.group || 'job';
    if (!groups.has(group)) {
      groups.set(group, []);
    }
    groups.get(group)!.push(param);
  }
  const rank = (group: string) => {
    const index = GROUP_ORDER.indexOf(group);
    return index >= 0 ? index : GROUP_ORDER.length - 1.5;
  };
  return Array.from(groups.entries())
    .sort((a, b) => rank(a[0]) - rank(b[0]))
    .map(([group, list]) => ({
      group,
      title: GROUP_TITLES[group] ?? group[0].toUpperCase() + group.slice(1),
      params: list
    }));
}

/** Why a value is not valid for a parameter, or null. Checked as the user types. */
export function validateParam(
  param: ITemplateParam,
  value: FieldValue
): string | null {
  if (param.type === 'boolean') {
    return null;
  }
  const text = String(value).trim();
  if (!text) {
    return param.required ? `${param.title} is required.` : null;
  }
  if (listedValues(param.type, value)) {
    // A list of values (a sweep, sweepForm.ts): each one must be valid.
    const parts = listedValues(param.type, value) ?? [];
    for (const part of parts) {
      const error = validateParam(param, part);
      if (error) {
        return `${part}: ${error}`;
      }
    }
    return parts.length > 0 ? null : 'Enter a value.';
  }
  if (param.type === 'integer' || param.type === 'number') {
    const number = Number(text);
    if (!Number.isFinite(number)) {
      return 'Enter a number.';
    }
    if (param.type === 'integer' && !Number.isInteger(number)) {
      return 'Enter a whole number.';
    }
    if (param.minimum !== null && param.minimum !== undefined) {
      if (number < param.minimum) {
        return `At least ${param.minimum}.`;
      }
    }
    if (param.maximum !== null && param.maximum !== undefined) {
      if (number > param.maximum) {
        return `At most ${param.maximum}.`;
      }
    }
  }
  if (param.type === 'choice' && param.choices && param.choices.length) {
    if (!param.choices.includes(text)) {
      return `Choose one of: ${param.choices.join(', ')}.`;
    }
  }
  if (param.type === 'path' && text.includes('\0')) {
    return 'The path contains a NUL byte.';
  }
  return null;
}

/** All the client-side errors of a form, by field. */
export function validateForm(
  template: ITemplateInfo,
  state: IFormState
): Record<string, string> {
  const errors: Record<string, string> = {};
  const nameError = validateName(state.name);
  if (nameError) {
    errors[NAME_FIELD] = nameError;
  }
  for (const param of template.params) {
    const error = validateParam(param, state.values[param.name] ?? '');
    if (error) {
      errors[param.name] = error;
    }
  }
  return errors;
}

/** The typed value sent for a parameter; undefined leaves it out (server default). */
export function toParamValue(
  param: ITemplateParam,
  value: FieldValue
): unknown {
  if (param.type === 'boolean') {
    return value === true;
  }
  const listed = listedValues(param.type, value);
  if (listed && listed.length > 0) {
    // A sweep: the preview (and this submission) is its first member.
    return toParamValue(param, listed[0]);
  }
  const text = String(value);
  if (text.trim() === '') {
    return undefined;
  }
  if (param.type === 'integer' || param.type === 'number') {
    const number = Number(text.trim());
    return Number.isFinite(number) ? number : text;
  }
  if (param.type === 'text') {
    return text;
  }
  return text.trim();
}

/** The body of POST jobs/render and POST jobs. */
export function toSubmission(
  template: ITemplateInfo,
  state: IFormState
): ITemplateSubmission {
  const params: Record<string, unknown> = {};
  const given = state.given ? new Set(state.given) : null;
  for (const param of template.params) {
    if (given && !given.has(param.name) && !param.required) {
      continue;
    }
    const value = toParamValue(param, state.values[param.name] ?? '');
    if (value !== undefined) {
      params[param.name] = value;
    }
  }
  const submission: ITemplateSubmission = {
    name: state.name.trim(),
    template: template.name,
    params
  };
  if (state.overrides && Object.keys(state.overrides).length > 0) {
    submission.overrides = { ...state.overrides };
  }
  if (state.after && state.after.length > 0) {
    submission.overrides = {
      ...submission.overrides,
      after: [...state.after],
      after_any: Boolean(state.afterAny)
    };
  }
  return submission;
}

/**
 * The form field a server error concerns: "params.lora_r" -> "lora_r", "name" -> "name";
 * a spec field ("nodes") maps to the parameter of the same name when the template has one;
 * null when the error concerns the whole job (shown above the submit button).
 */
export function fieldForError(
  field: string | null | undefined,
  template: ITemplateInfo | null
): string | null {
  if (!field) {
    return null;
  }
  if (field === NAME_FIELD || field === AFTER_FIELD) {
    return field;
  }
  const names = new Set((template?.params ?? []).map(p => p.name));
  const stripped = field.startsWith('params.')
    ? field.slice('params.'.length)
    : field;
  const head = stripped.split('.')[0];
  if (names.has(head)) {
    return head;
  }
  if (field === 'command' && names.has('script')) {
    return 'script';
  }
  return null;
}

/** A name for a new job from a script path: "project/train.py" -> "train-1130-1905". */
export function suggestName(path: string, now = new Date()): string {
  const base = (path.split('/').pop() || 'job').replace(/\.[^.]*$/, '');
  let slug = base
    .toLowerCase()
    .replace(/[^a-z0-9-]+/g, '-')
    .replace(/^-+|-+$/g, '')
    .slice(0, 38);
  if (!slug) {
    slug = 'job';
  }
  const pad = (n: number) => String(n).padStart(2, '0');
  const stamp =
    pad(now.getMonth() + 1) +
    pad(now.getDate()) +
    '-' +
    pad(now.getHours()) +
    pad(now.getMinutes()) +
    pad(now.getSeconds());
  return `${slug}-${stamp}`;
}
