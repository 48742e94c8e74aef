/**
 * The Submit form's model kept in React: the reducer of submitState.ts, the requests it
 * applies, the preview asked for shortly after the user stops typing, and the submit.
 */
import * as React from 'react';

import { fieldForError } from '../../form';
import { asApiError, HyperpodModel } from '../../model';
import { IJob, ITemplateInfo } from '../../models';
import {
  deriveSubmit,
  INITIAL_SUBMIT_STATE,
  ISubmitDerived,
  ISubmitState,
  pickTemplate,
  submitReducer,
  SubmitEvent
} from '../../submitState';
import { sweepSize, sweptValues, toSweepRequest } from '../../sweepForm';

const PREVIEW_DELAY = 350;

export interface ISubmitForm extends ISubmitDerived {
  state: ISubmitState;
  template: ITemplateInfo | null;
  dispatch: (event: SubmitEvent) => void;
  submit: () => Promise<void>;
}

export function useSubmitForm(
  model: HyperpodModel,
  onSubmitted: (job: IJob) => void
): ISubmitForm {
  const templates = model.templates;
  const request = model.submitRequest;
  const [state, dispatch] = React.useReducer(
    submitReducer,
    INITIAL_SUBMIT_STATE
  );
  const form = state.form;
  const template = React.useMemo(
    () =>
      templates && form
        ? (templates.find(t => t.name === form.template) ?? null)
        : null,
    [templates, form?.template]
  );
  const derived = React.useMemo(
    () => deriveSubmit(state, template),
    [state, template]
  );
  const { submission, submissionKey, hasClientErrors } = derived;

  // Start with the preferred template, or apply a request ("Submit as job", "Resubmit").
  React.useEffect(() => {
    if (!templates || templates.length === 0) {
      return;
    }
    if (request && request.serial !== state.appliedSerial) {
      const chosen = pickTemplate(templates, [request.template]);
      if (chosen) {
        dispatch({ type: 'request', template: chosen, request });
      }
      return;
    }
    if (form === null) {
      const chosen = pickTemplate(templates, [
        model.settings.defaultTemplate,
        model.cluster?.default_template
      ]);
      if (chosen) {
        dispatch({ type: 'start', template: chosen });
      }
    }
  }, [templates, request?.serial]);

  // Preview (and server-side validation) shortly after the user stops typing.
  React.useEffect(() => {
    if (!submission || !template) {
      return;
    }
    if (hasClientErrors) {
      dispatch({ type: 'preview-cleared' });
      return;
    }
    let cancelled = false;
    const timer = setTimeout(() => {
      dispatch({ type: 'preview-started' });
      model.client
        .render(submission)
        .then(rendered => {
          if (!cancelled) {
            dispatch({ type: 'previewed', rendered, key: submissionKey });
          }
        })
        .catch(reason => {
          if (!cancelled) {
            const error = asApiError(reason);
            const field = fieldForError(error.field, template);
            dispatch({ type: 'preview-refused', error, field });
          }
        });
    }, PREVIEW_DELAY);
    return () => {
      cancelled = true;
      clearTimeout(timer);
    };
  }, [submissionKey, hasClientErrors]);

  const submit = async () => {
    if (!derived.ready || !submission || !template) {
      return;
    }
    dispatch({ type: 'submit-started' });
    try {
      const swept = state.form ? sweptValues(template, state.form) : {};
      // A field with a list of values: one group of jobs (POST sweeps), its first member shown.
      const job =
        sweepSize(swept) > 1
          ? (await model.client.submitSweep(toSweepRequest(submission, swept)))
              .jobs[0]
          : await model.client.submit(submission);
      if (sweepSize(swept) > 1) {
        void model.refreshJobs(); // every member and the group row
      }
      onSubmitted(job);
      dispatch({ type: 'submitted', template });
    } catch (reason) {
      const error = asApiError(reason);
      const field = fieldForError(error.field, template);
      dispatch({ type: 'submit-refused', error, field });
    }
  };

  return { ...derived, state, template, dispatch, submit };
}
