/** Exactly what will be submitted, as the server rendered it, with its warnings. */
import { Dialog, showDialog } from '@jupyterlab/apputils';
import * as React from 'react';

import { expandIcon } from '../../compat';
import { ApiError } from '../../handler';
import { IRendered } from '../../models';
import { ErrorMessage, IconButton } from '../common';

const FORMATS: Record<string, string> = {
  manifest: 'Kubernetes manifest',
  sbatch: 'sbatch script'
};

export function SubmitPreview(props: {
  jobName: string;
  preview: IRendered | null;
  /** The preview is of an earlier state of the form (a new one is on its way). */
  stale: boolean;
  previewing: boolean;
  general: ApiError | null;
  /** Some field is refused: the preview waits for it. */
  refused: boolean;
}): JSX.Element {
  const { preview } = props;
  return (
    <section className="jp-hyperpod-Preview" aria-label="Preview">
      <div className="jp-hyperpod-Preview-title">
        Preview
        {preview && (
          <span className="jp-hyperpod-Preview-format">
            {FORMATS[preview.format] ?? 'command'}
          </span>
        )}
        {props.previewing && (
          <span className="jp-hyperpod-Preview-busy">updating…</span>
        )}
        <span className="jp-hyperpod-Spacer" />
        {preview && (
          <IconButton
            icon={expandIcon()}
            title="Show the whole preview"
            onClick={() =>
              void showDialog({
                title: `${props.jobName}: exactly what will be submitted`,
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
      <ErrorMessage error={props.general} />
      {preview ? (
        <>
          {preview.warnings.map(warning => (
            <div key={warning} className="jp-hyperpod-Message jp-mod-warning">
              {warning}
            </div>
          ))}
          <pre
            className={`jp-hyperpod-Preview-text ${props.stale ? 'jp-mod-stale' : ''}`}
            data-language={preview.language}
            tabIndex={0}
          >
            {preview.text}
          </pre>
        </>
      ) : (
        <div className="jp-hyperpod-Preview-empty">
          {props.refused
            ? 'Fill in the fields marked * and fix any marked in red to see exactly what will be submitted.'
            : 'Preparing the preview…'}
        </div>
      )}
    </section>
  );
}
