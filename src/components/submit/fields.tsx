/** The Submit form's own fields: the template, the job name, what a resubmit keeps, the groups. */
import * as React from 'react';

import {
  effectiveText,
  FieldValue,
  groupParams,
  IFormState,
  NAME_FIELD
} from '../../form';
import { HyperpodModel } from '../../model';
import { IRendered, ITemplateInfo } from '../../models';
import { ParamField } from './ParamField';

export function TemplateField(props: {
  templates: ITemplateInfo[];
  template: ITemplateInfo;
  onChoose: (template: ITemplateInfo) => void;
}): JSX.Element {
  const { templates, template } = props;
  return (
    <div className="jp-hyperpod-Field">
      <label htmlFor="jp-hyperpod-template">Template</label>
      <select
        id="jp-hyperpod-template"
        className="jp-mod-styled"
        value={template.name}
        onChange={event => {
          const next = templates.find(t => t.name === event.target.value);
          if (next) {
            props.onChoose(next);
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
  );
}

export function NameField(props: {
  name: string;
  error: string | null;
  onChange: (name: string) => void;
}): JSX.Element {
  const { error } = props;
  return (
    <div
      className={`jp-hyperpod-Field ${error ? 'jp-mod-invalid' : ''}`}
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
        value={props.name}
        aria-invalid={!!error}
        aria-describedby="jp-hyperpod-param-name-help"
        spellCheck={false}
        onChange={event => props.onChange(event.target.value)}
      />
      <div id="jp-hyperpod-param-name-help" className="jp-hyperpod-Field-help">
        {error ? (
          <span className="jp-hyperpod-Field-error" role="alert">
            {error}
          </span>
        ) : (
          "Lowercase letters, digits and '-'"
        )}
      </div>
    </div>
  );
}

/** The spec fields a resubmit keeps from the original job, with a way to drop them. */
export function KeptOverrides(props: {
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

/** The template's parameters in their groups; the advanced ones folded unless one needs attention. */
export function ParamGroups(props: {
  model: HyperpodModel;
  template: ITemplateInfo;
  form: IFormState;
  preview: IRendered | null;
  errorOf: (field: string) => string | null;
  advancedOpen: boolean;
  onAdvanced: (open: boolean) => void;
  onChange: (name: string, value: FieldValue) => void;
}): JSX.Element {
  const { model, template, form, errorOf } = props;
  return (
    <>
      {groupParams(template.params).map(group => {
        const fieldset = (
          <fieldset key={group.group} className="jp-hyperpod-Group">
            {group.group !== 'advanced' && <legend>{group.title}</legend>}
            {group.params.map(param => (
              <ParamField
                key={`${template.name}-${param.name}`}
                model={model}
                param={param}
                value={form.values[param.name] ?? ''}
                given={(form.given ?? []).includes(param.name)}
                effective={effectiveText(param, props.preview?.values)}
                error={errorOf(param.name)}
                onChange={value => props.onChange(param.name, value)}
              />
            ))}
          </fieldset>
        );
        if (group.group !== 'advanced') {
          return fieldset;
        }
        const needed = group.params.some(p => errorOf(p.name) !== null);
        return (
          <details
            key={group.group}
            className="jp-hyperpod-Advanced"
            open={props.advancedOpen || needed}
            onToggle={event =>
              props.onAdvanced((event.target as HTMLDetailsElement).open)
            }
          >
            <summary>{group.title}</summary>
            {fieldset}
          </details>
        );
      })}
    </>
  );
}
