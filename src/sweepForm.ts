/**
 * A sweep from the Submit form (#24 item 3): a number or whole-number field given a
 * list of values ("1e-4, 2e-4, 5e-4") makes the submit one group of jobs, every combination of
 * the listed values (`POST sweeps`). The preview shows the first member (each list's first value,
 * see form.ts toParamValue).
 */
import type { FieldValue, IFormState } from './form';
import { ISweepRequest, ITemplateInfo, ITemplateSubmission } from './models';

/** Parameter types whose field takes a comma-separated list of values. */
const LISTABLE = new Set(['integer', 'number']);

/** The values of a list field ("1e-4, 2e-4" -> ['1e-4', '2e-4']); null: one value. */
export function listedValues(type: string, value: FieldValue): string[] | null {
  if (
    !LISTABLE.has(type) ||
    typeof value !== 'string' ||
    !value.includes(',')
  ) {
    return null;
  }
  return value
    .split(',')
    .map(part => part.trim())
    .filter(part => part !== '');
}

/** Each listed field's typed values, in the template's order of parameters. */
export function sweptValues(
  template: ITemplateInfo,
  state: IFormState
): Record<string, unknown[]> {
  const swept: Record<string, unknown[]> = {};
  for (const param of template.params) {
    const values = listedValues(param.type, state.values[param.name] ?? '');
    if (values && values.length > 0) {
      swept[param.name] = values.map(value => Number(value));
    }
  }
  return swept;
}

/** How many jobs the listed values make (1: no sweep). */
export function sweepSize(swept: Record<string, unknown[]>): number {
  return Object.values(swept).reduce((size, values) => size * values.length, 1);
}

/** The body of POST sweeps: the form's submission without the swept fields, and their lists. */
export function toSweepRequest(
  submission: ITemplateSubmission,
  swept: Record<string, unknown[]>,
  maxConcurrent?: number | null
): ISweepRequest {
  const params = { ...(submission.params ?? {}) };
  for (const name of Object.keys(swept)) {
    delete params[name];
  }
  const request: ISweepRequest = { ...submission, params, sweep: swept };
  if (maxConcurrent && maxConcurrent > 0) {
    request.max_concurrent = maxConcurrent;
  }
  return request;
}
