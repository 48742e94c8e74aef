/** The Submit form's model without React: the events a user causes and what the form shows. */
import { NAME_FIELD } from '../form';
import { ApiError } from '../handler';
import { IRendered, ITemplateInfo, ITemplateParam } from '../models';
import {
  deriveSubmit,
  INITIAL_SUBMIT_STATE,
  ISubmitState,
  pickTemplate,
  submitReducer,
  SubmitEvent
} from '../submitState';

function param(p: Partial<ITemplateParam> & { name: string }): ITemplateParam {
  return {
    title: p.name,
    type: 'string',
    default: null,
    required: false,
    description: '',
    choices: null,
    minimum: null,
    maximum: null,
    group: 'job',
    must_exist: false,
    program: false,
    ...p
  };
}

const script: ITemplateInfo = {
  name: 'script',
  title: 'Script',
  description: '',
  params: [
    param({ name: 'script', type: 'path', required: true, title: 'Script' }),
    param({ name: 'nodes', type: 'integer', default: 1, minimum: 1 })
  ]
};
const other: ITemplateInfo = { ...script, name: 'other', title: 'Other' };

function rendered(text: string): IRendered {
  return {
    format: 'command',
    language: 'shell',
    text,
    spec: {} as IRendered['spec'],
    warnings: [],
    values: {}
  };
}

function run(events: SubmitEvent[]): ISubmitState {
  return events.reduce(submitReducer, INITIAL_SUBMIT_STATE);
}

describe('the Submit form model', () => {
  it('starts once, from the preferred template, with nothing touched', () => {
    const state = run([
      { type: 'start', template: script },
      { type: 'start', template: other }
    ]);
    expect(state.form?.template).toBe('script');
    expect(state.form?.name).toMatch(/^script-\d{4}-\d{6}$/);
    expect(pickTemplate([script, other], [null, 'other'])).toBe(other);
    // A required field left blank is not called required before the user touches it.
    const derived = deriveSubmit(state, script);
    expect(derived.clientErrors.script).toBe('Script is required.');
    expect(derived.errorOf('script')).toBeNull();
    expect(derived.ready).toBe(false);
  });

  it('says the server words for a bad name as the user types', () => {
    const state = run([
      { type: 'start', template: script },
      { type: 'name', name: 'Bad Name!' }
    ]);
    expect(deriveSubmit(state, script).errorOf(NAME_FIELD)).toBe(
      "'B' and 'N' must be lowercase; a space and '!' are not allowed (a job name takes lowercase letters, digits and '-')"
    );
  });

  it('is ready once the preview is of this very submission', () => {
    let state = run([
      { type: 'start', template: script },
      { type: 'name', name: 'job-1' },
      { type: 'value', name: 'script', value: 'train.py' }
    ]);
    const { submission, submissionKey } = deriveSubmit(state, script);
    expect(submission).toEqual({
      name: 'job-1',
      template: 'script',
      params: { script: 'train.py' }
    });
    state = submitReducer(state, {
      type: 'previewed',
      rendered: rendered('python train.py'),
      key: submissionKey
    });
    expect(deriveSubmit(state, script).ready).toBe(true);
    // Typing again makes the preview stale until the next one.
    state = submitReducer(state, { type: 'value', name: 'nodes', value: '2' });
    expect(deriveSubmit(state, script).ready).toBe(false);
  });

  it("shows the server's field error beside the field, until the field changes", () => {
    const error = new ApiError(
      "'tool' is not executable: make it so (chmod +x tool)",
      400,
      'invalid_request',
      'params.script'
    );
    let state = run([
      { type: 'start', template: script },
      { type: 'value', name: 'script', value: 'tool' },
      { type: 'preview-started' },
      { type: 'preview-refused', error, field: 'script' }
    ]);
    expect(state.previewing).toBe(false);
    expect(deriveSubmit(state, script).errorOf('script')).toBe(error.message);
    expect(state.general).toBeNull();
    state = submitReducer(state, {
      type: 'value',
      name: 'script',
      value: 'tool.sh'
    });
    expect(deriveSubmit(state, script).errorOf('script')).toBeNull();
  });

  it('applies a request once and keeps a typed name across templates', () => {
    const request = {
      template: 'script',
      params: { script: 'project/run.sh' },
      overrides: { launcher: 'plain' },
      serial: 3
    };
    let state = run([{ type: 'request', template: script, request }]);
    expect(state.appliedSerial).toBe(3);
    expect(state.form?.given).toEqual(['script']);
    expect(state.form?.overrides).toEqual({ launcher: 'plain' });
    expect(state.form?.name).toMatch(/^run-/);
    state = submitReducer(state, { type: 'drop-overrides' });
    expect(state.form?.overrides).toBeUndefined();
    state = submitReducer(state, { type: 'name', name: 'mine' });
    state = submitReducer(state, { type: 'template', template: other });
    expect(state.form?.template).toBe('other');
    expect(state.form?.name).toBe('mine');
  });

  it('starts again from the template after a submit; a refusal keeps the form', () => {
    const general = new ApiError('the cluster is down', 503, 'unavailable');
    let state = run([
      { type: 'start', template: script },
      { type: 'value', name: 'script', value: 'train.py' },
      { type: 'submit-started' },
      { type: 'submit-refused', error: general, field: null }
    ]);
    expect(state.submitting).toBe(false);
    expect(state.general).toBe(general);
    expect(state.form?.values.script).toBe('train.py');
    state = submitReducer(state, { type: 'submitted', template: script });
    expect(state.form?.values.script).toBe('');
    expect(state.touched).toEqual([]);
    expect(state.preview).toBeNull();
  });
});
