/**
 * The journey of a data scientist on the local cluster, in a real browser:
 * open the panel -> see the node -> browse to a script -> submit it from the form after seeing
 * the preview -> watch its log lines arrive live -> see it succeed -> cancel another running
 * job -> see an error message for an invalid field. Screenshots of each view go to docs/.
 */
import { expect, test } from '@jupyterlab/galata';
import type { WebSocketRoute } from '@playwright/test';
import * as fs from 'fs';

import { openJob, openPanel, shot, showView, stateOf, submit } from './helpers';

test.use({ autoGoto: true });

test('the whole journey on the local cluster', async ({ page }) => {
  await test.step('open the panel and see the node', async () => {
    await openPanel(page);
    await showView(page, 'cluster');
    const node = page.locator('.jp-hyperpod-NodeRow').first();
    await expect(node).toBeVisible();
    await expect(node.locator('.jp-hyperpod-health-healthy')).toHaveText('healthy');
    await expect(page.locator('.jp-hyperpod-Facts')).toContainText('local');
    await shot(page, 'cluster.png');
  });

  await test.step('browse the partition to the script', async () => {
    await showView(page, 'files');
    await page.locator('.jp-hyperpod-FileRow[data-path="project"] .jp-hyperpod-FileCol-name').click();
    await expect(page.locator('.jp-hyperpod-Crumb[aria-current="location"]')).toHaveText('project');
    const script = page.locator('.jp-hyperpod-FileRow[data-path="project/train.py"]');
    await expect(script).toBeVisible();
    await expect(script.locator('.jp-hyperpod-FileCol-size')).toHaveText(/\d+ B/);
    await shot(page, 'files.png');
    await script.getByRole('button', { name: 'Submit train.py as a job' }).click();
  });

  let jobName = '';
  await test.step('see the preview, then submit from the form', async () => {
    await expect(page.locator('#jp-hyperpod-view-submit')).toBeVisible();
    await expect(page.locator('#jp-hyperpod-param-script')).toHaveValue('project/train.py');
    jobName = await page.locator('#jp-hyperpod-param-name').inputValue();
    expect(jobName).toMatch(/^train-\d{4}-\d{6}$/);
    const preview = page.locator('.jp-hyperpod-Preview-text');
    await expect(preview).toContainText('train.py');
    await expect(preview).toContainText(jobName);
    const submit = page.locator('.jp-hyperpod-SubmitButton');
    await expect(submit).toBeEnabled();
    await preview.scrollIntoViewIfNeeded();
    await shot(page, 'submit.png');
    await submit.click();
  });

  await test.step('watch the log lines arrive live', async () => {
    const job = page.locator(`.jp-hyperpod-JobView[data-job="${jobName}"]`);
    await expect(job).toBeVisible();
    const terminal = job.locator('.jp-hyperpod-Terminal .xterm-rows');
    await expect(terminal).toContainText('step 02/16');
    // More lines keep arriving while the job runs.
    await expect(job.locator('.jp-hyperpod-JobHeader .jp-hyperpod-Badge')).toHaveText('RUNNING');
    await expect(job.locator('.jp-hyperpod-LogStatus')).toContainText('live');
    await expect(terminal).toContainText('step 06/16');
    await shot(page, 'logs.png');
  });

  await test.step('see it succeed', async () => {
    const job = page.locator(`.jp-hyperpod-JobView[data-job="${jobName}"]`);
    await expect(job.locator('.jp-hyperpod-Terminal .xterm-rows')).toContainText(
      'training finished',
      { timeout: 60000 }
    );
    await expect(job.locator('.jp-hyperpod-JobHeader .jp-hyperpod-Badge')).toHaveText(
      'SUCCEEDED',
      { timeout: 30000 }
    );
    // The progress bar was redrawn in place: one line, not one per redraw.
    const text = await job.locator('.jp-hyperpod-Terminal .xterm-rows').innerText();
    expect(text.match(/progress \[/g)?.length).toBe(1);
    expect(text).toContain('progress [################] 100%');
    // Download gets the log as a file.
    const download = page.waitForEvent('download');
    await job.getByRole('button', { name: 'Download the log' }).click();
    const file = await download;
    expect(file.suggestedFilename()).toBe(`${jobName}-rank0.log`);
    const saved = await file.path();
    expect(fs.readFileSync(saved, 'utf-8')).toContain('training finished');
    await job.getByRole('tab', { name: 'Details' }).click();
    await expect(job.locator('.jp-hyperpod-Details')).toContainText('Exit code');
    await shot(page, 'job-details.png');
    // Resubmit opens the form prefilled, under a new name.
    await job.getByRole('button', { name: /^Resubmit/ }).click();
    await expect(page.locator('#jp-hyperpod-view-submit')).toBeVisible();
    await expect(page.locator('#jp-hyperpod-param-script')).toHaveValue('project/train.py');
    await expect(page.locator('#jp-hyperpod-param-name')).toHaveValue(`${jobName}-2`);
  });

  await test.step('cancel another running job', async () => {
    const other = `sleeper-${Date.now() % 100000}`;
    await submit(page, other, 'project/sleep.py');
    await showView(page, 'jobs');
    const row = page.locator(`.jp-hyperpod-JobRow[data-job="${other}"]`);
    await expect(row).toHaveAttribute('data-state', 'RUNNING', { timeout: 30000 });
    await expect(page.locator(`.jp-hyperpod-JobRow[data-job="${jobName}"]`)).toHaveAttribute(
      'data-state',
      'SUCCEEDED'
    );
    await shot(page, 'jobs.png');
    await row.locator('.jp-hyperpod-cancel').click();
    const dialog = page.locator('.jp-Dialog');
    await expect(dialog).toContainText(`Cancel ${other}?`);
    await dialog.locator('.jp-Dialog-button.jp-mod-warn').click();
    await expect(row).toHaveAttribute('data-state', 'CANCELLED', { timeout: 30000 });
    await expect(row.locator('.jp-hyperpod-cancel')).toHaveCount(0);
  });

  await test.step('see an error message for an invalid field', async () => {
    await showView(page, 'submit');
    await page.locator('#jp-hyperpod-param-script').fill('project/train.py');
    // The browser checks what it can as the user types...
    await page.locator('#jp-hyperpod-param-name').fill('Bad Name');
    await expect(page.locator('[data-field="name"] .jp-hyperpod-Field-error')).toHaveText(
      "'B' and 'N' must be lowercase; a space is not allowed (a job name takes lowercase letters, digits and '-')"
    );
    await page.locator('#jp-hyperpod-param-name').fill('too-many-nodes');
    // ...and the server's message about a field shows next to that field.
    await page.locator('#jp-hyperpod-param-nodes').fill('5');
    const error = page.locator('[data-field="nodes"] .jp-hyperpod-Field-error');
    await expect(error).toContainText('one node');
    await expect(page.locator('.jp-hyperpod-SubmitButton')).toBeDisabled();
    await error.scrollIntoViewIfNeeded();
    await shot(page, 'submit-error.png');
    await page.locator('#jp-hyperpod-param-nodes').fill('1');
    await expect(error).toHaveCount(0);
    await expect(page.locator('.jp-hyperpod-SubmitButton')).toBeEnabled();
  });
});

test('files: open in JupyterLab, submit from its file browser', async ({ page }) => {
  await openPanel(page);
  await showView(page, 'files');
  await page.locator('.jp-hyperpod-FileRow[data-path="project"] .jp-hyperpod-FileCol-name').click();
  // A file of the partition opens in JupyterLab (the partition is under the server root here).
  await page
    .locator('.jp-hyperpod-FileRow[data-path="project/notes.md"] .jp-hyperpod-FileCol-name')
    .click();
  await expect(page.locator('.jp-mod-current .lm-TabBar-tabLabel', { hasText: 'notes.md' })).toBeVisible();

  // JupyterLab's own file browser offers "Submit as HyperPod Job" on scripts of the partition.
  await page.locator('.jp-SideBar.jp-mod-left .lm-TabBar-tab[data-id="filebrowser"]').click();
  await page.filebrowser.openDirectory('/fs/shared/project');
  await page.locator('.jp-DirListing-item[title*="train.py"]').click({ button: 'right' });
  await page.locator('.lm-Menu-item', { hasText: 'Submit as HyperPod Job' }).click();
  await expect(page.locator('#jp-hyperpod-view-submit')).toBeVisible();
  await expect(page.locator('#jp-hyperpod-param-script')).toHaveValue('project/train.py');
  await expect(page.locator('.jp-hyperpod-Preview-text')).toContainText('train.py');
});

test('files: a sbatch script of your own goes to the server as it is', async ({ page }) => {
  // "Submit as HyperPod Job" on a job file (manifest or sbatch script) previews what the server's
  // apply would send; the local cluster runs none, and says so (a 400 with what to do instead).
  const path = 'fs/shared/project/finetune.sbatch';
  await page.contents.uploadContent(
    '#!/bin/bash\n#SBATCH --nodes=2\n#SBATCH --ntasks-per-node=2\nsrun python train.py\n',
    'text',
    path
  );
  try {
    await page.sidebar.openTab('filebrowser');
    await page.filebrowser.openDirectory('/fs/shared/project');
    await page.locator('.jp-DirListing-item[title*="finetune.sbatch"]').click({ button: 'right' });
    await page.locator('.lm-Menu-item', { hasText: 'Submit as HyperPod Job' }).click();
    const dialog = page.locator('.jp-Dialog');
    await expect(dialog).toContainText('Cannot submit finetune.sbatch');
    await expect(dialog).toContainText('the local cluster runs no manifest or sbatch script');
    await dialog.locator('.jp-Dialog-button').last().click();
    await expect(dialog).toHaveCount(0);
  } finally {
    await page.contents.deleteFile(path);
  }
});

test('logs: a dropped connection resumes from the last offset, telling the user', async ({
  page
}) => {
  // Every log WebSocket goes through this route, which forwards it to the server unchanged.
  const sockets: { url: string; route: WebSocketRoute }[] = [];
  await page.routeWebSocket(/\/logs\/stream/, route => {
    sockets.push({ url: route.url(), route });
    route.connectToServer();
  });
  const name = `drop-${Date.now() % 100000}`;
  const id = await submit(page, name, 'project/train.py');
  await openPanel(page);
  await openJob(page, id, 'logs');
  const job = page.locator(`.jp-hyperpod-JobView[data-job="${name}"]`);
  const terminal = job.locator('.jp-hyperpod-Terminal .xterm-rows');
  const status = job.locator('.jp-hyperpod-LogStatus');
  await expect(terminal).toContainText('step 03/16');
  expect(sockets).toHaveLength(1);

  // The cluster drops the stream: the user is told, and it resumes where it stopped.
  await sockets[0].route.close({ code: 4503, reason: 'cluster unreachable' });
  await expect(status).toContainText('cannot be reached');
  await expect(status).toContainText('Reconnecting');
  await expect.poll(() => sockets.length).toBe(2);
  const offset = Number(new URL(sockets[1].url).searchParams.get('offset'));
  expect(offset).toBeGreaterThan(0);
  await expect(status).toContainText('live');
  await expect(terminal).toContainText('training finished', { timeout: 60000 });
  const text = await terminal.innerText();
  expect(text.split('step 03/16').length - 1).toBe(1);
  expect(text.split('step 16/16').length - 1).toBe(1);
});

test('logs: one rank or all ranks of a multi-rank job', async ({ page }) => {
  const name = `ranks-${Date.now() % 100000}`;
  const id = await submit(page, name, 'project/train.py', { procs_per_node: 2 });
  await openPanel(page);
  await openJob(page, id, 'logs');
  const job = page.locator(`.jp-hyperpod-JobView[data-job="${name}"]`);
  const terminal = job.locator('.jp-hyperpod-Terminal .xterm-rows');
  const rank = job.getByLabel('Rank', { exact: true });
  await expect(rank.locator('option')).toHaveText([/Rank 0/, /Rank 1/, 'All ranks']);
  await expect(terminal).toContainText('step 02/16');
  await rank.selectOption({ label: 'All ranks' });
  await expect(terminal).toContainText('[0] step');
  await expect(terminal).toContainText('[1] step');
  await rank.selectOption('1');
  await expect(terminal).toContainText('training finished', { timeout: 60000 });
  await expect(terminal).not.toContainText('[1]');
});

test('metrics: the curves of an MLflow run', async ({ page }) => {
  const name = `curves-${Date.now() % 100000}`;
  const id = await submit(page, name, 'project/curves.py');
  // Let the job create the MLflow store before the server reads it: a reader racing the job's
  // first schema migration on a fresh sqlite store breaks that store (reported server-side).
  await expect.poll(() => stateOf(page, id), { timeout: 90000 }).toBe('SUCCEEDED');
  await openPanel(page);
  await openJob(page, id, 'metrics');
  const job = page.locator(`.jp-hyperpod-JobView[data-job="${name}"]`);
  await expect(job.locator('.jp-hyperpod-Chart[data-metric="loss"]')).toBeVisible({
    timeout: 90000
  });
  await expect(job.locator('.jp-hyperpod-Chart[data-metric="learning_rate"]')).toBeVisible();
  await expect(job.locator('.jp-hyperpod-Chart[data-metric="loss"] canvas')).toHaveCount(1);
  await shot(page, 'metrics.png');
});

test('dark theme and a thousand-node filter stay readable', async ({ page }) => {
  await page.theme.setDarkTheme();
  await openPanel(page);
  await showView(page, 'cluster');
  await expect(page.locator('.jp-hyperpod-NodeRow').first()).toBeVisible();
  await page.locator('[aria-label="Filter nodes by name or type"]').fill('no-such-node');
  await expect(page.locator('.jp-hyperpod-Empty')).toHaveText('No node matches the filter.');
  await page.locator('[aria-label="Filter nodes by name or type"]').fill('');
  await expect(page.locator('.jp-hyperpod-NodeRow').first()).toBeVisible();
  await shot(page, 'cluster-dark.png');
});
