/**
 * "Submit as job" on the user's own manifest or sbatch script: the server's `POST jobs/apply`
 * (jupyter_hyperpod/core/byo.py), previewed first with every change marked.
 */

import { Dialog, showDialog, showErrorMessage } from '@jupyterlab/apputils';
import { ServerConnection } from '@jupyterlab/services';
import { Widget } from '@lumino/widgets';

import { requestAPI } from './handler';
import { IAppliedFile, IJob } from './models';

export type { IAppliedFile, IFileChange, IFileProblem } from './models';

/** Files that are submitted as they are (a manifest or an sbatch script). */
export function isJobFile(name: string): boolean {
  return /\.(ya?ml|sbatch|slurm)$/i.test(name);
}

export function apply(
  body: { text: string; filename: string; fix?: boolean; dry_run?: boolean },
  settings: ServerConnection.ISettings = ServerConnection.makeSettings()
): Promise<IAppliedFile> {
  return requestAPI<IAppliedFile>(
    'jobs/apply',
    { method: 'POST', body: JSON.stringify(body) },
    settings
  );
}

export async function partitionText(
  path: string,
  settings: ServerConnection.ISettings = ServerConnection.makeSettings()
): Promise<string> {
  const reply = await requestAPI<{ text: string }>(
    `files/text?path=${encodeURIComponent(path)}`,
    { method: 'GET' },
    settings
  );
  return reply.text;
}

/** The preview: each change marked `+`, each problem `!` with its fix, then the diff. */
export function previewNode(applied: IAppliedFile): HTMLElement {
  const node = document.createElement('div');
  node.className = 'jp-hyperpod-ApplyPreview';
  const list = (title: string, lines: string[], mark: string) => {
    if (lines.length === 0) {
      return;
    }
    const heading = document.createElement('h4');
    heading.textContent = title;
    node.appendChild(heading);
    const items = document.createElement('ul');
    for (const line of lines) {
      const item = document.createElement('li');
      item.dataset.mark = mark;
      item.textContent = `${mark} ${line}`;
      items.appendChild(item);
    }
    node.appendChild(items);
  };
  list(
    'Would not run as written',
    applied.problems.map(
      p => `${p.path}: ${p.message}` + (p.fix ? ` (fix: ${p.fix})` : '')
    ),
    '!'
  );
  list(
    'Changes to what is sent',
    applied.changes.map(c => `${c.path} ${c.action}: ${c.value} (${c.reason})`),
    '+'
  );
  list('Warnings', applied.warnings, '~');
  const diff = applied.problems.length > 0 ? applied.fix_diff : applied.diff;
  if (diff) {
    const pre = document.createElement('pre');
    pre.className = 'jp-hyperpod-ApplyDiff';
    pre.textContent = diff;
    node.appendChild(pre);
  }
  return node;
}

/** Preview a partition file, then submit it (with the fix when it needs one). */
export async function applyFile(
  path: string,
  onSubmitted: (job: IJob) => void
): Promise<void> {
  const filename = path.split('/').pop() ?? path;
  try {
    const text = await partitionText(path);
    const preview = await apply({ text, filename, dry_run: true });
    const fixable =
      preview.problems.length > 0 && preview.problems.every(p => p.fix !== '');
    const canSend = preview.problems.length === 0 || fixable;
    const buttons = [Dialog.cancelButton()];
    if (canSend) {
      buttons.push(
        Dialog.okButton({
          label:
            preview.problems.length > 0 ? 'Accept the fix and submit' : 'Submit'
        })
      );
    }
    const result = await showDialog({
      title: `Submit ${filename} as a job`,
      body: new Widget({ node: previewNode(preview) }),
      buttons
    });
    if (!result.button.accept) {
      return;
    }
    const sent = await apply({
      text,
      filename,
      fix: preview.problems.length > 0
    });
    if (sent.job) {
      onSubmitted(sent.job);
    }
  } catch (error) {
    await showErrorMessage(
      `Cannot submit ${filename}`,
      error instanceof Error ? error.message : String(error)
    );
  }
}
