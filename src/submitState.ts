/**
 * The Submit form's model, free of React: one state (the values, what the user touched, the
 * server's answer to the last preview, whether a submit is under way), the events that change it,
 * and what follows from it (the errors each field shows, the body sent, whether Submit is ready).
 * SubmitView keeps it with `useReducer`; the tests drive it directly.
 */

import {
  FieldValue,
  givenParams,
  IFormState,
  initialValues,
  NAME_FIELD,
  suggestName,
  toSubmission,
  validateForm
} from './form';
import { ApiError } from './handler';
import { ISubmitRequest } from './model';
import { IRendered, ITemplateInfo, ITemplateSubmission } from './models';

export interface ISubmitState {
  /** The form's values; null until the templates have come. */
  form: IFormState | null;
  /** The server's error about one field, by field. */
  serverErrors: Record<string, string>;
  /** The server's error about the whole job (shown above the submit button). */
  general: ApiError | null;
  preview: IRendered | null;
  /** The submission (as JSON) the preview was made for. */
  previewFor: string;
  previewing: boolean;
  submitting: boolean;
  /** Fields the user changed: "required" is only said of those, not of a fresh form. */
  touched: string[];
  advancedOpen: boolean;
  /** The serial of the last request ("Submit as job", "Resubmit") applied. */
  appliedSerial: number;
}

export const INITIAL_SUBMIT_STATE: ISubmitState = {
  form: null,
  serverErrors: {},
  general: null,
  preview: null,
  previewFor: '',
  previewing: false,
  submitting: false,
  touched: [],
  advancedOpen: false,
  appliedSerial: 0
};

export type SubmitEvent =
  /** The form's first template (the user's setting, else the server's default). */
  | { type: 'start'; template: ITemplateInfo }
  /** A request to submit something ("Submit as job", "Resubmit"), in its template. */
  | { type: 'request'; template: ITemplateInfo; request: ISubmitRequest }
  | { type: 'template'; template: ITemplateInfo }
  | { type: 'name'; name: string }
  | { type: 'value'; name: string; value: FieldValue }
  | { type: 'drop-overrides' }
  /** Run after these jobs (the "Run after" field): ids, and whether any end will do. */
  | { type: 'after'; after: string[]; afterAny: boolean }
  | { type: 'advanced'; open: boolean }
  /** The client's checks refuse the form: no preview. */
  | { type: 'preview-cleared' }
  | { type: 'preview-started' }
  | { type: 'previewed'; rendered: IRendered; key: string }
  /** The server refused the preview: `field` is the form field it concerns, or null. */
  | { type: 'preview-refused'; error: ApiError; field: string | null }
  | { type: 'submit-started' }
  | { type: 'submitted'; template: ITemplateInfo }
  | { type: 'submit-refused'; error: ApiError; field: string | null };

/** A new form for a template: its defaults, nothing set, a fresh name. */
export function freshForm(template: ITemplateInfo): IFormState {
  return {
    template: template.name,
    name: suggestName(template.name),
    values: initialValues(template),
    given: []
  };
}

function withTouched(touched: string[], name: string): string[] {
  return touched.includes(name) ? touched : [...touched, name];
}

export function submitReducer(
  state: ISubmitState,
  event: SubmitEvent
): ISubmitState {
  const form = state.form;
  switch (event.type) {
    case 'start':
      return form ? state : { ...state, form: freshForm(event.template) };
    case 'request': {
      const { template, request } = event;
      const script = String(request.params.script ?? template.name);
      return {
        ...state,
        form: {
          template: template.name,
          name: request.name ?? suggestName(script),
          values: initialValues(template, request.params),
          given: givenParams(template, request.params),
          overrides: request.overrides
        },
        serverErrors: {},
        general: null,
        touched: [],
        appliedSerial: request.serial
      };
    }
    case 'template':
      if (!form) {
        return state;
      }
      // A name the user typed stays; a suggested one follows the template.
      return {
        ...state,
        form: {
          ...freshForm(event.template),
          name: state.touched.includes(NAME_FIELD)
            ? form.name
            : suggestName(event.template.name)
        },
        serverErrors: {},
        general: null
      };
    case 'name':
      if (!form) {
        return state;
      }
      return {
        ...state,
        form: { ...form, name: event.name },
        touched: withTouched(state.touched, NAME_FIELD),
        serverErrors: state.serverErrors[NAME_FIELD] ? {} : state.serverErrors
      };
    case 'value': {
      if (!form) {
        return state;
      }
      const given = form.given ?? [];
      const rest = { ...state.serverErrors };
      delete rest[event.name];
      return {
        ...state,
        form: {
          ...form,
          values: { ...form.values, [event.name]: event.value },
          given: given.includes(event.name) ? given : [...given, event.name]
        },
        touched: withTouched(state.touched, event.name),
        serverErrors: rest
      };
    }
    case 'drop-overrides':
      return form
        ? { ...state, form: { ...form, overrides: undefined } }
        : state;
    case 'after':
      return form
        ? {
            ...state,
            form: { ...form, after: event.after, afterAny: event.afterAny }
          }
        : state;
    case 'advanced':
      return { ...state, advancedOpen: event.open };
    case 'preview-cleared':
      return { ...state, preview: null };
    case 'preview-started':
      return { ...state, previewing: true };
    case 'previewed':
      return {
        ...state,
        preview: event.rendered,
        previewFor: event.key,
        previewing: false,
        serverErrors: {},
        general: null
      };
    case 'preview-refused':
      return {
        ...state,
        preview: null,
        previewing: false,
        serverErrors: event.field ? { [event.field]: event.error.message } : {},
        general: event.field ? null : event.error
      };
    case 'submit-started':
      return { ...state, submitting: true };
    case 'submitted':
      // A new submission starts from the template again: nothing carries over.
      return {
        ...state,
        form: freshForm(event.template),
        touched: [],
        preview: null,
        submitting: false
      };
    case 'submit-refused':
      return event.field
        ? {
            ...state,
            submitting: false,
            serverErrors: { [event.field]: event.error.message }
          }
        : { ...state, submitting: false, general: event.error };
  }
}

/** What follows from the state for a template: the errors, the body, whether Submit is ready. */
export interface ISubmitDerived {
  clientErrors: Record<string, string>;
  hasClientErrors: boolean;
  submission: ITemplateSubmission | null;
  /** The submission as JSON: what a preview is for. */
  submissionKey: string;
  /** The error a field shows, or null. */
  errorOf: (field: string) => string | null;
  /** The preview is of this very submission and nothing is refused. */
  ready: boolean;
}

export function deriveSubmit(
  state: ISubmitState,
  template: ITemplateInfo | null
): ISubmitDerived {
  const form = state.form;
  const clientErrors = template && form ? validateForm(template, form) : {};
  const hasClientErrors = Object.keys(clientErrors).length > 0;
  const submission = template && form ? toSubmission(template, form) : null;
  const submissionKey = submission ? JSON.stringify(submission) : '';
  const errorOf = (field: string): string | null => {
    const value = field === NAME_FIELD ? form?.name : form?.values[field];
    const blank = value === '' || value === undefined;
    const client =
      state.touched.includes(field) || !blank ? clientErrors[field] : undefined;
    return client ?? state.serverErrors[field] ?? null;
  };
  const ready =
    !hasClientErrors &&
    Object.keys(state.serverErrors).length === 0 &&
    state.preview !== null &&
    state.previewFor === submissionKey &&
    !state.submitting;
  return {
    clientErrors,
    hasClientErrors,
    submission,
    submissionKey,
    errorOf,
    ready
  };
}

/** The template to start with: the user's setting, then the server's default, then the first. */
export function pickTemplate(
  templates: ITemplateInfo[],
  preferred: (string | null | undefined)[]
): ITemplateInfo | null {
  for (const name of preferred) {
    const found = name ? templates.find(t => t.name === name) : undefined;
    if (found) {
      return found;
    }
  }
  return templates[0] ?? null;
}
