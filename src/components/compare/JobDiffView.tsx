/**
 * Two jobs' difference (`GET jobs/{a}/diff/{b}`): the spec fields and resolved config values
 * that changed, each code file of the snapshots that differs (its unified diff collapsed, long
 * lines scrolling inside their <pre>), the packages that changed, and what could not be compared.
 */
import * as React from 'react';

import { formatBytes } from '../../format';
import {
  ICodeDiff,
  ICodeFileChange,
  IConfigChange,
  IJobDiff,
  IPackageChange,
  IValueChange
} from '../../models';
import { showCommit, showValue } from './values';

function Section(props: {
  title: string;
  count: number;
  empty: string;
  /** Shown whether or not anything differs. */
  lead?: React.ReactNode;
  children?: React.ReactNode;
}): JSX.Element {
  return (
    <section className="jp-hyperpod-Diff-section" aria-label={props.title}>
      <h3 className="jp-hyperpod-Section-title">
        {props.title} ({props.count})
      </h3>
      {props.lead}
      {props.count === 0 ? (
        <div className="jp-hyperpod-Dim">{props.empty}</div>
      ) : (
        props.children
      )}
    </section>
  );
}

function ChangeTable(props: {
  label: string;
  a: string;
  b: string;
  rows: { key: string; name: string; a: string; b: string }[];
}): JSX.Element {
  return (
    <div className="jp-hyperpod-Compare-scroll">
      <table
        className="jp-hyperpod-Table jp-hyperpod-ChangeTable"
        aria-label={props.label}
      >
        <thead>
          <tr>
            <th scope="col">{props.label}</th>
            <th scope="col">{props.a}</th>
            <th scope="col">{props.b}</th>
          </tr>
        </thead>
        <tbody>
          {props.rows.map(row => (
            <tr key={row.key} data-field={row.name}>
              <th scope="row">{row.name}</th>
              <td>{row.a}</td>
              <td>{row.b}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

function valueRows(values: IValueChange[]) {
  return values.map(v => ({
    key: v.field,
    name: v.field,
    a: showValue(v.a),
    b: showValue(v.b)
  }));
}

/** A unified diff, collapsed until opened. */
function Patch(props: { summary: React.ReactNode; text: string }) {
  return (
    <details className="jp-hyperpod-Diff-file">
      <summary>{props.summary}</summary>
      <pre className="jp-hyperpod-Diff-text">{props.text}</pre>
    </details>
  );
}

function ConfigChangeView(props: {
  change: IConfigChange;
  a: string;
  b: string;
}) {
  const { change } = props;
  return (
    <div className="jp-hyperpod-Diff-config" data-config={change.name}>
      <div className="jp-hyperpod-Diff-name">
        {change.name} <span className="jp-hyperpod-Dim">{change.status}</span>
      </div>
      {change.values.length > 0 && (
        <ChangeTable
          label={`${change.name} values`}
          a={props.a}
          b={props.b}
          rows={valueRows(change.values)}
        />
      )}
      {change.diff && <Patch summary="Resolved text diff" text={change.diff} />}
    </div>
  );
}

function fileSize(file: ICodeFileChange): string {
  const size = (bytes: number | null) =>
    bytes === null ? '–' : formatBytes(bytes);
  if (file.status === 'added') {
    return size(file.b_size);
  }
  if (file.status === 'removed') {
    return size(file.a_size);
  }
  return `${size(file.a_size)} → ${size(file.b_size)}`;
}

function CodeFile(props: { file: ICodeFileChange }): JSX.Element {
  const { file } = props;
  const summary = (
    <>
      <span className="jp-hyperpod-Diff-path">{file.path}</span>{' '}
      <span className="jp-hyperpod-Dim">
        {file.status} · {fileSize(file)}
      </span>
    </>
  );
  return (
    <li data-path={file.path} data-status={file.status}>
      {file.diff !== null ? (
        <Patch summary={summary} text={file.diff} />
      ) : (
        <div className="jp-hyperpod-Diff-file">
          {summary}
          {file.note && <div className="jp-hyperpod-Dim">{file.note}</div>}
        </div>
      )}
    </li>
  );
}

function CodeSection(props: { code: ICodeDiff; a: string; b: string }) {
  const { code } = props;
  const side = (id: string, s: ICodeDiff['a']) =>
    !s
      ? `${id}: no snapshot`
      : s.commit === null
        ? `${id}: ${s.files} files`
        : `${id}: ${showCommit(s.commit, s.dirty)}, ${s.files} files`;
  return (
    <Section
      title="Code"
      count={code.files.length}
      empty={`No file differs (${code.unchanged} the same).`}
      lead={
        <div className="jp-hyperpod-Dim">
          {side(props.a, code.a)} · {side(props.b, code.b)}
          {code.files.length > 0 && ` · ${code.unchanged} unchanged`}
        </div>
      }
    >
      <ul className="jp-hyperpod-Diff-files" aria-label="Changed files">
        {code.files.map(file => (
          <CodeFile key={file.path} file={file} />
        ))}
      </ul>
    </Section>
  );
}

function packageRows(packages: IPackageChange[]) {
  return packages.map(p => ({
    key: p.name,
    name: p.name,
    a: p.a ?? '–',
    b: p.b ?? '–'
  }));
}

export function JobDiffView(props: {
  diff: IJobDiff;
  /** The jobs' names by id, for the column heads (ids where missing). */
  names?: Record<string, string>;
}): JSX.Element {
  const { diff } = props;
  const a = props.names?.[diff.a] ?? diff.a;
  const b = props.names?.[diff.b] ?? diff.b;
  const env = diff.environment;
  return (
    <div className="jp-hyperpod-Diff">
      <Section title="Spec" count={diff.spec.length} empty="Same spec.">
        <ChangeTable
          label="Spec field"
          a={a}
          b={b}
          rows={valueRows(diff.spec)}
        />
      </Section>
      <Section
        title="Configs"
        count={diff.configs.length}
        empty="Same resolved configs."
      >
        {diff.configs.map(change => (
          <ConfigChangeView key={change.name} change={change} a={a} b={b} />
        ))}
      </Section>
      <CodeSection code={diff.code} a={a} b={b} />
      <Section
        title="Packages"
        count={env.packages.length}
        empty={
          env.same
            ? 'Same packages (pip freeze).'
            : 'No package list to compare.'
        }
      >
        <ChangeTable
          label="Package"
          a={a}
          b={b}
          rows={packageRows(env.packages)}
        />
      </Section>
      {diff.notes.length > 0 && (
        <Section title="Notes" count={diff.notes.length} empty="">
          <ul className="jp-hyperpod-Diff-notes">
            {diff.notes.map(note => (
              <li key={note}>{note}</li>
            ))}
          </ul>
        </Section>
      )}
    </div>
  );
}
