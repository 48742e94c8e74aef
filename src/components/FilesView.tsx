import {
  caretLeftIcon,
  caretRightIcon,
  fileIcon,
  folderIcon,
  homeIcon,
  imageIcon,
  jsonIcon,
  LabIcon,
  markdownIcon,
  notebookIcon,
  pythonIcon,
  runIcon,
  terminalIcon,
  yamlIcon
} from '@jupyterlab/ui-components';
import * as React from 'react';

import {
  breadcrumbs,
  formatBytes,
  formatDate,
  formatShortDate,
  isSubmittable,
  joinPath
} from '../format';
import { ApiError } from '../handler';
import { asApiError, HyperpodModel } from '../model';
import { FileSort, IFileEntry, IFileListing } from '../models';
import { ErrorMessage, IconButton, Loading, RefreshButton } from './common';

const ICONS: [RegExp, LabIcon][] = [
  [/\.py$/i, pythonIcon],
  [/\.ipynb$/i, notebookIcon],
  [/\.(md|markdown)$/i, markdownIcon],
  [/\.(json|jsonl)$/i, jsonIcon],
  [/\.(ya?ml)$/i, yamlIcon],
  [/\.(sh|bash|sbatch)$/i, terminalIcon],
  [/\.(png|jpe?g|gif|svg)$/i, imageIcon]
];

function iconFor(entry: IFileEntry): LabIcon {
  if (entry.type === 'directory') {
    return folderIcon;
  }
  return ICONS.find(([pattern]) => pattern.test(entry.name))?.[1] ?? fileIcon;
}

export interface IFilesViewProps {
  model: HyperpodModel;
  /** Open a partition-relative file in JupyterLab; undefined when not mounted here. */
  openFile?: (path: string) => void;
  /** Prefill the Submit form with a script. */
  submitFile: (path: string) => void;
}

const SORTS: { key: 'name' | 'size' | 'mtime'; title: string }[] = [
  { key: 'name', title: 'Name' },
  { key: 'size', title: 'Size' },
  { key: 'mtime', title: 'Modified' }
];

export function FilesView(props: IFilesViewProps): JSX.Element {
  const { model } = props;
  const pageSize = model.settings.filesPageSize;
  const [path, setPath] = React.useState('');
  const [offset, setOffset] = React.useState(0);
  const [sort, setSort] = React.useState<FileSort>('name');
  const [listing, setListing] = React.useState<IFileListing | null>(null);
  const [error, setError] = React.useState<ApiError | null>(null);
  const [loading, setLoading] = React.useState(false);
  const [reload, setReload] = React.useState(0);

  React.useEffect(() => {
    let cancelled = false;
    setLoading(true);
    model.client
      .files(path, { offset, limit: pageSize, sort })
      .then(result => {
        if (!cancelled) {
          setListing(result);
          setError(null);
        }
      })
      .catch(reason => {
        if (!cancelled) {
          setError(asApiError(reason));
        }
      })
      .finally(() => {
        if (!cancelled) {
          setLoading(false);
        }
      });
    return () => {
      cancelled = true;
    };
  }, [path, offset, sort, pageSize, reload]);

  const go = (target: string) => {
    setPath(target);
    setOffset(0);
  };
  const toggleSort = (key: 'name' | 'size' | 'mtime') => {
    setSort(sort === key ? (`-${key}` as FileSort) : key);
    setOffset(0);
  };
  const open = (entry: IFileEntry) => {
    const target = joinPath(listing?.path ?? path, entry.name);
    if (entry.type === 'directory') {
      go(target);
    } else if (props.openFile) {
      props.openFile(target);
    }
  };

  const crumbs = breadcrumbs(path);
  const total = listing?.total ?? 0;
  const first = total === 0 ? 0 : offset + 1;
  const last = Math.min(total, offset + pageSize);
  const partition = model.cluster?.filesystem.partition ?? 'Partition';

  return (
    <div className="jp-hyperpod-View jp-hyperpod-FilesView">
      <div className="jp-hyperpod-Breadcrumbs" aria-label="Current folder">
        <button
          className="jp-hyperpod-Crumb"
          title={`Partition root: ${partition}`}
          onClick={() => go('')}
        >
          <homeIcon.react tag="span" elementSize="normal" />
        </button>
        {crumbs.map((crumb, i) => (
          <React.Fragment key={crumb.path}>
            <span className="jp-hyperpod-Crumb-sep">/</span>
            <button
              className="jp-hyperpod-Crumb"
              aria-current={i === crumbs.length - 1 ? 'location' : undefined}
              onClick={() => go(crumb.path)}
            >
              {crumb.name}
            </button>
          </React.Fragment>
        ))}
        <span className="jp-hyperpod-Spacer" />
        <RefreshButton
          title="Refresh folder"
          onClick={() => setReload(r => r + 1)}
        />
      </div>
      {!props.openFile && (
        <div className="jp-hyperpod-Hint">
          The partition is not under the Jupyter server's root: files can be
          browsed and submitted but not opened here.
        </div>
      )}
      <ErrorMessage
        error={error}
        stale={listing !== null}
        onRetry={() => setReload(r => r + 1)}
      />
      <div className="jp-hyperpod-FileTable" role="table" aria-busy={loading}>
        <div className="jp-hyperpod-FileRow jp-hyperpod-FileHeader" role="row">
          {SORTS.map(column => (
            <button
              key={column.key}
              role="columnheader"
              className={`jp-hyperpod-FileCol-${column.key}`}
              title={`Sort by ${column.title.toLowerCase()}`}
              aria-sort={
                sort === column.key
                  ? 'ascending'
                  : sort === `-${column.key}`
                    ? 'descending'
                    : 'none'
              }
              onClick={() => toggleSort(column.key)}
            >
              {column.title}
              {sort === column.key
                ? ' ▲'
                : sort === `-${column.key}`
                  ? ' ▼'
                  : ''}
            </button>
          ))}
          <span className="jp-hyperpod-FileCol-actions" />
        </div>
        {listing?.note ? (
          <div className="jp-hyperpod-Note" role="note">
            {listing.note}
          </div>
        ) : null}
        {listing === null ? (
          error ? null : (
            <Loading what="files" />
          )
        ) : listing.entries.length === 0 ? (
          <div className="jp-hyperpod-Empty">This folder is empty.</div>
        ) : (
          <div className="jp-hyperpod-FileRows">
            {listing.entries.map(entry => {
              const full = joinPath(listing.path, entry.name);
              const script =
                entry.type !== 'directory' && isSubmittable(entry.name);
              const Icon = iconFor(entry);
              return (
                <div
                  key={entry.name}
                  className="jp-hyperpod-FileRow"
                  role="row"
                  data-path={full}
                  data-type={entry.type}
                  data-script={script ? 'true' : undefined}
                >
                  <button
                    className="jp-hyperpod-FileCol-name"
                    role="cell"
                    title={
                      entry.type === 'directory'
                        ? `Open folder ${entry.name}`
                        : props.openFile
                          ? `Open ${entry.name} in JupyterLab`
                          : entry.name
                    }
                    onClick={() => open(entry)}
                  >
                    <Icon.react tag="span" elementSize="normal" />
                    <span className="jp-hyperpod-FileName">{entry.name}</span>
                  </button>
                  <span className="jp-hyperpod-FileCol-size" role="cell">
                    {entry.type === 'directory' ? '' : formatBytes(entry.size)}
                  </span>
                  <span
                    className="jp-hyperpod-FileCol-mtime"
                    role="cell"
                    title={formatDate(entry.mtime)}
                  >
                    {formatShortDate(entry.mtime)}
                  </span>
                  <span className="jp-hyperpod-FileCol-actions" role="cell">
                    {script && (
                      <IconButton
                        icon={runIcon}
                        title={`Submit ${entry.name} as a job`}
                        onClick={() => props.submitFile(full)}
                      />
                    )}
                  </span>
                </div>
              );
            })}
          </div>
        )}
      </div>
      {total > pageSize && (
        <div className="jp-hyperpod-Pager">
          <IconButton
            icon={caretLeftIcon}
            title="Previous page"
            disabled={offset === 0}
            onClick={() => setOffset(Math.max(0, offset - pageSize))}
          />
          <span>
            {first.toLocaleString()}–{last.toLocaleString()} of{' '}
            {total.toLocaleString()}
          </span>
          <IconButton
            icon={caretRightIcon}
            title="Next page"
            disabled={offset + pageSize >= total}
            onClick={() => setOffset(offset + pageSize)}
          />
        </div>
      )}
      {total > 0 && total <= pageSize && (
        <div className="jp-hyperpod-ListCaption">
          {total.toLocaleString()} item{total === 1 ? '' : 's'}
        </div>
      )}
    </div>
  );
}
