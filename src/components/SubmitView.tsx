import { launchIcon, runIcon } from '@jupyterlab/ui-components';
import * as React from 'react';

import { AFTER_FIELD, NAME_FIELD } from '../form';
import { HyperpodModel } from '../model';
import { IJob } from '../models';
import { ErrorMessage, IconButton, Loading, useSignal } from './common';
import {
  KeptOverrides,
  NameField,
  ParamGroups,
  TemplateField
} from './submit/fields';
import { RunAfterField } from './submit/RunAfterField';
import { SubmitPreview } from './submit/SubmitPreview';
import { useSubmitForm } from './submit/useSubmitForm';
import { sweepSize, sweptValues } from '../sweepForm';

// Where the tests and older callers found it.
export { pickTemplate } from '../submitState';

export interface ISubmitViewProps {
  model: HyperpodModel;
  onSubmitted: (job: IJob) => void;
  /** Move the form to the main area (large templates); absent where it already is. */
  onExpand?: () => void;
}

/** The Submit form: its model is submitState.ts (kept by useSubmitForm), these are its views. */
export function SubmitView(props: ISubmitViewProps): JSX.Element {
  const { model } = props;
  useSignal(model.templatesChanged);
  useSignal(model.clusterChanged); // the form: the cluster's fields
  useSignal(model.viewChanged); // the form: a Submit request, the settings
  useSignal(model.jobsChanged); // the form: the jobs it may run after
  const templates = model.templates;
  const submitForm = useSubmitForm(model, props.onSubmitted);
  const { state, template, dispatch, errorOf, ready } = submitForm;
  const jobCount =
    template && state.form ? sweepSize(sweptValues(template, state.form)) : 1;
  const form = state.form;

  if (templates === null) {
    return (
      <div className="jp-hyperpod-View jp-hyperpod-SubmitView">
        {model.templatesError ? (
          <ErrorMessage
            error={model.templatesError}
            onRetry={() => void model.loadTemplates()}
          />
        ) : (
          <Loading what="templates" />
        )}
      </div>
    );
  }
  if (!template || !form) {
    return (
      <div className="jp-hyperpod-View jp-hyperpod-SubmitView">
        <div className="jp-hyperpod-Empty">
          The server offers no job template.
        </div>
      </div>
    );
  }

  return (
    <div className="jp-hyperpod-View jp-hyperpod-SubmitView">
      {props.onExpand && (
        <div className="jp-hyperpod-SubmitView-bar">
          <IconButton
            icon={launchIcon}
            title="Open the form in the main area (more room for large templates)"
            label="Open in main area"
            onClick={props.onExpand}
          />
        </div>
      )}
      <form
        className="jp-hyperpod-Form"
        aria-label="Submit a job"
        onSubmit={event => {
          event.preventDefault();
          void submitForm.submit();
        }}
      >
        <TemplateField
          templates={templates}
          template={template}
          onChoose={next => dispatch({ type: 'template', template: next })}
        />
        <NameField
          name={form.name}
          error={errorOf(NAME_FIELD)}
          onChange={name => dispatch({ type: 'name', name })}
        />
        <KeptOverrides
          overrides={form.overrides}
          onDrop={() => dispatch({ type: 'drop-overrides' })}
        />
        <RunAfterField
          jobs={model.jobs}
          after={form.after ?? []}
          afterAny={Boolean(form.afterAny)}
          error={errorOf(AFTER_FIELD) ?? undefined}
          onChange={(after, afterAny) =>
            dispatch({ type: 'after', after, afterAny })
          }
        />
        <ParamGroups
          model={model}
          template={template}
          form={form}
          preview={state.preview}
          errorOf={errorOf}
          advancedOpen={state.advancedOpen}
          onAdvanced={open => dispatch({ type: 'advanced', open })}
          onChange={(name, value) => dispatch({ type: 'value', name, value })}
        />
        <SubmitPreview
          jobName={form.name}
          preview={state.preview}
          stale={state.previewFor !== submitForm.submissionKey}
          previewing={state.previewing}
          general={state.general}
          refused={
            submitForm.hasClientErrors ||
            Object.keys(state.serverErrors).length > 0
          }
        />
        <div className="jp-hyperpod-SubmitBar">
          <button
            type="submit"
            className="jp-Button jp-mod-styled jp-mod-accept jp-hyperpod-SubmitButton"
            disabled={!ready}
            title={
              ready
                ? 'Submit exactly what the preview shows'
                : 'Available once the preview is ready'
            }
          >
            <runIcon.react tag="span" elementSize="normal" />
            {state.submitting
              ? 'Submitting…'
              : jobCount > 1
                ? `Submit ${jobCount} jobs (sweep)`
                : 'Submit job'}
          </button>
        </div>
      </form>
    </div>
  );
}
