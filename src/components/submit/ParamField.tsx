/** One input of the Submit form, by the parameter's type; a path offers the partition's entries. */
import * as React from 'react';

import { FieldValue } from '../../form';
import { joinPath } from '../../format';
import { HyperpodModel } from '../../model';
import { ITemplateParam } from '../../models';

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

export function ParamField(props: {
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
          type="text"
          // Numbers as text: "1e-4, 2e-4" (a list of values) submits a sweep (sweepForm.ts).
          inputMode={
            param.type === 'integer'
              ? 'numeric'
              : param.type === 'number'
                ? 'decimal'
                : undefined
          }
          title={
            param.type === 'integer' || param.type === 'number'
              ? 'One value, or several separated by commas: one job for each (a sweep)'
              : undefined
          }
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
