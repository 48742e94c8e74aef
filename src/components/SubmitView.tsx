import { Dialog, showDialog } from '@jupyterlab/apputils';
import { launchIcon, runIcon } from '@jupyterlab/ui-components';
import * as React from 'react';

import {
  effectiveText,
  fieldForError,
  FieldValue,
  givenParams,
  groupParams,
  IFormState,
  initialValues,
  NAME_FIELD,
  suggestName,
  toSubmission,
  validateForm
} from '../form';
import { expandIcon } from '../compat';
import { joinPath } from '../format';
import { ApiError } from '../handler';
import { asApiError, HyperpodModel } from '../model';
import { IJob, IRendered, ITemplateInfo, ITemplateParam } from '../models';
import { ErrorMessage, IconButton, Loading, useSignal } from './common';

export interface ISubmitViewProps {
  model: HyperpodModel;
  onSubmitted: (job: IJob) => void;
  /** Move the form to the main area (large templates); absent where it already is. */
  onExpand?: () => void;
}

const PREVIEW_DELAY = 350;

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

/** A path input that offers the partition's entries under what is typed so far. */
function PathInput(props: {
  id: string;
  model: HyperpodModel;
  value: string;
  placeholder?: string;
  invalid: boolean;
  describedBy: string;
  onChange: (value: string) => void;
}): JSX.Element {
  const [options, setOptions] = React.useState<string[]>([]);
  const folder = props.value.includes('/')
    ? props.value.slice(0, props.value.lastIndexOf('/'))
    : '';
  React.useEffect(() => {
    let cancelled = false;
    const timer = setTimeout(() => {
      props.model.client
        .files(folder, { limit: 200, sort: 'name' })
        .then(listing => {
          if (!cancelled) {
            setOptions(
              listing.entries.map(
                entry =>
                  joinPath(folder, entry.name) +
                  (entry.type === 'directory' ? '/' : '')
              )
            );
          }
        })
        .catch(() => {
          if (!cancelled) {
            setOptions([]);
          }
        });
    }, 200);
    return () => {
      cancelled = true;
      clearTimeout(timer);
    };
  }, [folder]);
  return (
    <>
      <input
        id={props.id}
        name={props.id}
        className="jp-mod-styled"
        type="text"
        list={`${props.id}-choices`}
        value={props.value}
        placeholder={props.placeholder || undefined}
        aria-invalid={props.invalid}
        aria-describedby={props.describedBy}
        autoComplete="off"
        spellCheck={false}
        onChange={event => props.onChange(event.target.value)}
      />
      <datalist id={`${props.id}-choices`}>
        {options.map(option => (
          <option key={option} value={option} />
        ))}
      </datalist>
    </>
  );
}

function ParamField(props: {
  model: HyperpodModel;
  param: ITemplateParam;
  value: FieldValue;
  /** Whether the user set this field (else it shows what the job will use). */
  given: boolean;
  /** The value the job will use when the field is left alone (from the server). */
  effective: string;
  error: string | null;
  onChange: (value: FieldValue) => void;
}): JSX.Element {
  const { param, error } = props;
  const effective = props.given ? '' : props.effective;
  const value =
    param.type === 'boolean' && !props.given && effective !== ''
      ? effective === 'true'
      : props.value;
  const id = `jp-hyperpod-param-${param.name}`;
  const helpId = `${id}-help`;
  let input: JSX.Element;
  switch (param.type) {
    case 'boolean':
      input = (
        <input
          id={id}
          name={id}
          type="checkbox"
          checked={value === true}
          aria-describedby={helpId}
          onChange={event => props.onChange(event.target.checked)}
        />
      );
      break;
    case 'choice':
      input = (
        <select
          id={id}
          name={id}
          className="jp-mod-styled"
          value={String(value)}
          aria-invalid={!!error}
          aria-describedby={helpId}
          onChange={event => props.onChange(event.target.value)}
        >
          {!param.required && (
            <option value="">
              {effective ? `(default: ${effective})` : '(default)'}
            </option>
          )}
          {(param.choices ?? []).map(choice => (
            <option key={choice} value={choice}>
              {choice}
            </option>
          ))}
        </select>
      );
      break;
    case 'text':
      input = (
        <textarea
          id={id}
          name={id}
          className="jp-mod-styled"
          rows={3}
          value={String(value)}
          aria-invalid={!!error}
          aria-describedby={helpId}
          spellCheck={false}
          onChange={event => props.onChange(event.target.value)}
        />
      );
      break;
    case 'path':
      input = (
        <PathInput
          id={id}
          model={props.model}
          value={String(value)}
          placeholder={effective}
          invalid={!!error}
          describedBy={helpId}
          onChange={props.onChange}
        />
      );
      break;
    default:
      input = (
        <input
          id={id}
          name={id}
          className="jp-mod-styled"
          type={
            param.type === 'integer' || param.type === 'number'
              ? 'number'
              : 'text'
          }
          step={param.type === 'integer' ? 1 : 'any'}
          min={param.minimum ?? undefined}
          max={param.maximum ?? undefined}
          value={String(value)}
          placeholder={effective || undefined}
          aria-invalid={!!error}
          aria-describedby={helpId}
          spellCheck={false}
          onChange={event => props.onChange(event.target.value)}
        />
      );
  }
  return (
    <div
      className={`jp-hyperpod-Field ${param.type === 'boolean' ? 'jp-mod-checkbox' : ''} ${error ? 'jp-mod-invalid' : ''}`}
      data-field={param.name}
    >
      <label htmlFor={id}>
        {param.title}
        {param.required && <span className="jp-hyperpod-Required"> *</span>}
      </label>
      {input}
      <div id={helpId} className="jp-hyperpod-Field-help">
        {error ? (
          <span className="jp-hyperpod-Field-error" role="alert">
            {error}
          </span>
        ) : (
          param.description
        )}
      </div>
    </div>
  );
}

/** A new form for a template: its defaults, nothing set, a fresh name. */
function freshState(template: ITemplateInfo): IFormState {
  return {
    template: template.name,
    name: suggestName(template.name),
    values: initialValues(template),
    given: []
  };
}

/** The spec fields a resubmit keeps from the original job, with a way to drop them. */
function KeptOverrides(props: {
  overrides: Record<string, unknown> | undefined;
  onDrop: () => void;
}): JSX.Element | null {
  const entries = Object.entries(props.overrides ?? {});
  if (entries.length === 0) {
    return null;
  }
  const text = entries
    .map(
      ([key, value]) =>
        `${key}=${typeof value === 'object' ? JSON.stringify(value) : String(value)}`
    )
    .join(', ');
  return (
    <div className="jp-hyperpod-Message jp-hyperpod-Kept" role="note">
      <span className="jp-hyperpod-Message-text">
        Kept from the original job: <code>{text}</code>
      </span>
      <button
        type="button"
        className="jp-Button jp-mod-minimal jp-hyperpod-Message-retry"
        onClick={props.onDrop}
      >
        Drop
      </button>
    </div>
  );
}

export function SubmitView(props: ISubmitViewProps): JSX.Element {
  const { model } = props;
  useSignal(model.changed);
  const templates = model.templates;
  const request = model.submitRequest;
  const [state, setState] = React.useState<IFormState | null>(null);
  const [serverErrors, setServerErrors] = React.useState<
    Record<string, string>
  >({});
  const [general, setGeneral] = React.useState<ApiError | null>(null);
  const [preview, setPreview] = React.useState<IRendered | null>(null);
  const [previewFor, setPreviewFor] = React.useState('');
  const [previewing, setPreviewing] = React.useState(false);
  const [submitting, setSubmitting] = React.useState(false);
  const appliedSerial = React.useRef(0);
  // Fields the user changed: "required" is only said of those, not of a fresh form.
  const [touched, setTouched] = React.useState<Set<string>>(new Set());
  const [advancedOpen, setAdvancedOpen] = React.useState(false);

  const template = React.useMemo(
    () =>
      templates && state
        ? (templates.find(t => t.name === state.template) ?? null)
        : null,
    [templates, state?.template]
  );

  // Start with the preferred template, or apply a request ("Submit as job", "Resubmit").
  React.useEffect(() => {
    if (!templates || templates.length === 0) {
      return;
    }
    if (request && request.serial !== appliedSerial.current) {
      appliedSerial.current = request.serial;
      const chosen = pickTemplate(templates, [request.template]);
      if (chosen) {
        const script = String(request.params.script ?? chosen.name);
        setState({
          template: chosen.name,
          name: request.name ?? suggestName(script),
          values: initialValues(chosen, request.params),
          given: givenParams(chosen, request.params),
          overrides: request.overrides
        });
        setServerErrors({});
        setGeneral(null);
        setTouched(new Set());
      }
      return;
    }
    if (state === null) {
      const chosen = pickTemplate(templates, [
        model.settings.defaultTemplate,
        model.cluster?.default_template
      ]);
      if (chosen) {
        setState(freshState(chosen));
      }
    }
  }, [templates, request?.serial]);

  const clientErrors = React.useMemo(
    () => (template && state ? validateForm(template, state) : {}),
    [template, state]
  );
  const hasClientErrors = Object.keys(clientErrors).length > 0;
  const submission = React.useMemo(
    () => (template && state ? toSubmission(template, state) : null),
    [template, state]
  );
  const submissionKey = submission ? JSON.stringify(submission) : '';

  // Preview (and server-side validation) shortly after the user stops typing.
  React.useEffect(() => {
    if (!submission || !template) {
      return;
    }
    if (hasClientErrors) {
      setPreview(null);
      return;
    }
    let cancelled = false;
    const timer = setTimeout(() => {
      setPreviewing(true);
      model.client
        .render(submission)
        .then(rendered => {
          if (cancelled) {
            return;
          }
          setPreview(rendered);
          setPreviewFor(submissionKey);
          setServerErrors({});
          setGeneral(null);
        })
        .catch(reason => {
          if (cancelled) {
            return;
          }
          const error = asApiError(reason);
          const field = fieldForError(error.field, template);
          setPreview(null);
          if (field) {
            setServerErrors({ [field]: error.message });
            setGeneral(null);
          } else {
            setServerErrors({});
            setGeneral(error);
          }
        })
        .finally(() => {
          if (!cancelled) {
            setPreviewing(false);
          }
        });
    }, PREVIEW_DELAY);
    return () => {
      cancelled = true;
      clearTimeout(timer);
    };
  }, [submissionKey, hasClientErrors]);

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
  if (!template || !state) {
    return (
      <div className="jp-hyperpod-View jp-hyperpod-SubmitView">
        <div className="jp-hyperpod-Empty">
          The server offers no job template.
        </div>
      </div>
    );
  }

  const touch = (name: string) => {
    if (!touched.has(name)) {
      setTouched(new Set([...touched, name]));
    }
  };
  const setValue = (name: string, value: FieldValue) => {
    touch(name);
    const given = state.given ?? [];
    setState({
      ...state,
      values: { ...state.values, [name]: value },
      given: given.includes(name) ? given : [...given, name]
    });
    if (serverErrors[name]) {
      const rest = { ...serverErrors };
      delete rest[name];
      setServerErrors(rest);
    }
  };
  const errorOf = (field: string) => {
    const value = field === NAME_FIELD ? state.name : state.values[field];
    const blank = value === '' || value === undefined;
    const client =
      touched.has(field) || !blank ? clientErrors[field] : undefined;
    return client ?? serverErrors[field] ?? null;
  };
  const ready =
    !hasClientErrors &&
    Object.keys(serverErrors).length === 0 &&
    preview !== null &&
    previewFor === submissionKey &&
    !submitting;

  const submit = async () => {
    if (!ready || !submission) {
      return;
    }
    setSubmitting(true);
    try {
      const job = await model.client.submit(submission);
      props.onSubmitted(job);
      // A new submission starts from the template again: nothing carries over.
      setState(freshState(template));
      setTouched(new Set());
      setPreview(null);
    } catch (reason) {
      const error = asApiError(reason);
      const field = fieldForError(error.field, template);
      if (field) {
        setServerErrors({ [field]: error.message });
      } else {
        setGeneral(error);
      }
    } finally {
      setSubmitting(false);
    }
  };

  const nameError = errorOf(NAME_FIELD);
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
          void submit();
        }}
      >
        <div className="jp-hyperpod-Field">
          <label htmlFor="jp-hyperpod-template">Template</label>
          <select
            id="jp-hyperpod-template"
            className="jp-mod-styled"
            value={template.name}
            onChange={event => {
              const next = templates.find(t => t.name === event.target.value);
              if (next) {
                // A name the user typed stays; a suggested one follows the template.
                setState({
                  ...freshState(next),
                  name: touched.has(NAME_FIELD)
                    ? state.name
                    : suggestName(next.name)
                });
                setServerErrors({});
                setGeneral(null);
              }
            }}
          >
            {templates.map(t => (
              <option key={t.name} value={t.name}>
                {t.title}
              </option>
            ))}
          </select>
          <div className="jp-hyperpod-Field-help">{template.description}</div>
        </div>
        <div
          className={`jp-hyperpod-Field ${nameError ? 'jp-mod-invalid' : ''}`}
          data-field={NAME_FIELD}
        >
          <label htmlFor="jp-hyperpod-param-name">
            Job name<span className="jp-hyperpod-Required"> *</span>
          </label>
          <input
            id="jp-hyperpod-param-name"
            name="jp-hyperpod-param-name"
            className="jp-mod-styled"
            type="text"
            value={state.name}
            aria-invalid={!!nameError}
            aria-describedby="jp-hyperpod-param-name-help"
            spellCheck={false}
            onChange={event => {
              touch(NAME_FIELD);
              setState({ ...state, name: event.target.value });
              if (serverErrors[NAME_FIELD]) {
                setServerErrors({});
              }
            }}
          />
          <div
            id="jp-hyperpod-param-name-help"
            className="jp-hyperpod-Field-help"
          >
            {nameError ? (
              <span className="jp-hyperpod-Field-error" role="alert">
                {nameError}
              </span>
            ) : (
              "Lowercase letters, digits and '-'"
            )}
          </div>
        </div>
        <KeptOverrides
          overrides={state.overrides}
          onDrop={() => setState({ ...state, overrides: undefined })}
        />
        {groupParams(template.params).map(group => {
          const fieldset = (
            <fieldset key={group.group} className="jp-hyperpod-Group">
              {group.group !== 'advanced' && <legend>{group.title}</legend>}
              {group.params.map(param => (
                <ParamField
                  key={`${template.name}-${param.name}`}
                  model={model}
                  param={param}
                  value={state.values[param.name] ?? ''}
                  given={(state.given ?? []).includes(param.name)}
                  effective={effectiveText(param, preview?.values)}
                  error={errorOf(param.name)}
                  onChange={value => setValue(param.name, value)}
                />
              ))}
            </fieldset>
          );
          if (group.group !== 'advanced') {
            return fieldset;
          }
          // Advanced options stay folded unless one of them needs attention.
          const needed = group.params.some(p => errorOf(p.name) !== null);
          return (
            <details
              key={group.group}
              className="jp-hyperpod-Advanced"
              open={advancedOpen || needed}
              onToggle={event =>
                setAdvancedOpen((event.target as HTMLDetailsElement).open)
              }
            >
              <summary>{group.title}</summary>
              {fieldset}
            </details>
          );
        })}
        <section className="jp-hyperpod-Preview" aria-label="Preview">
          <div className="jp-hyperpod-Preview-title">
            Preview
            {preview && (
              <span className="jp-hyperpod-Preview-format">
                {preview.format === 'manifest'
                  ? 'Kubernetes manifest'
                  : preview.format === 'sbatch'
                    ? 'sbatch script'
                    : 'command'}
              </span>
            )}
            {previewing && (
              <span className="jp-hyperpod-Preview-busy">updating…</span>
            )}
            <span className="jp-hyperpod-Spacer" />
            {preview && (
              <IconButton
                icon={expandIcon()}
                title="Show the whole preview"
                onClick={() =>
                  void showDialog({
                    title: `${state.name}: exactly what will be submitted`,
                    body: (
                      <pre className="jp-hyperpod-Preview-text jp-hyperpod-Preview-full">
                        {preview.text}
                      </pre>
                    ),
                    buttons: [Dialog.okButton({ label: 'Close' })]
                  })
                }
              />
            )}
          </div>
          <ErrorMessage error={general} />
          {preview ? (
            <>
              {preview.warnings.map(warning => (
                <div
                  key={warning}
                  className="jp-hyperpod-Message jp-mod-warning"
                >
                  {warning}
                </div>
              ))}
              <pre
                className={`jp-hyperpod-Preview-text ${previewFor !== submissionKey ? 'jp-mod-stale' : ''}`}
                data-language={preview.language}
                tabIndex={0}
              >
                {preview.text}
              </pre>
            </>
          ) : (
            <div className="jp-hyperpod-Preview-empty">
              {hasClientErrors || Object.keys(serverErrors).length > 0
                ? 'Fill in the fields marked * and fix any marked in red to see exactly what will be submitted.'
                : 'Preparing the preview…'}
            </div>
          )}
        </section>
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
            {submitting ? 'Submitting…' : 'Submit job'}
          </button>
        </div>
      </form>
    </div>
  );
}
