/**
 * The short journey that must work in every JupyterLab the panel supports (README "Install":
 * JupyterLab 4.0 to 4.x). `bash ui-tests/run.sh` runs it in the newest JupyterLab with the whole
 * suite, and again in the floor's (playwright.floor.config.js, ui-tests/floor-venv.sh):
 * open the panel, Cluster view, submit a script from the form, follow its log to the end,
 * see the notification; and the browser console names no error of the extension on the way.
 */
import { expect, test } from '@jupyterlab/galata';
import type { ConsoleMessage } from '@playwright/test';

import { openPanel, showView } from './helpers';

test.use({ autoGoto: false });

/** A console message that is about this extension: an error, or a shared-module version warning. */
function aboutTheExtension(message: ConsoleMessage): boolean {
  const kind = message.type();
  const text = message.text();
  const where = message.location().url ?? '';
  const ours = /hyperpod/i.test(text) || where.includes('/jupyter-hyperpod/');
  return ours && (kind === 'error' || (kind === 'warning' && /Unsatisfied version/.test(text)));
}

test('smoke: panel, cluster, submit, log to the end, notification', async ({ page }) => {
  const problems: string[] = [];
  page.on('console', message => {
    if (aboutTheExtension(message)) {
      problems.push(`${message.type()}: ${message.text()} (${message.location().url})`);
    }
  });
  page.on('pageerror', error => {
    if (/hyperpod/i.test(`${error.message}\n${error.stack ?? ''}`)) {
      problems.push(`page error: ${error.message}`);
    }
  });
  await page.goto('');
  await page.waitForSelector('#jupyterlab-splash', { state: 'detached' });

  await test.step('open the panel on the Cluster view', async () => {
    await openPanel(page);
    await showView(page, 'cluster');
    await expect(page.locator('.jp-hyperpod-NodeRow').first()).toBeVisible();
    await expect(page.locator('.jp-hyperpod-Facts')).toContainText('local');
  });

  let jobName = '';
  await test.step('submit a script from the form, after its preview', async () => {
    await showView(page, 'submit');
    await page.locator('#jp-hyperpod-param-script').fill('project/train.py');
    jobName = `smoke-${Date.now() % 1000000}`;
    await page.locator('#jp-hyperpod-param-name').fill(jobName);
    const preview = page.locator('.jp-hyperpod-Preview-text');
    await expect(preview).toContainText('train.py');
    await expect(preview).toContainText(jobName);
    // The preview's expand button: JupyterLab's expandIcon from 4.1, the panel's own before.
    await expect(page.getByTitle('Show the whole preview')).toBeVisible();
    await expect(page.locator('.jp-hyperpod-SubmitButton')).toBeEnabled();
    await page.locator('.jp-hyperpod-SubmitButton').click();
  });

  await test.step('see the notification', async () => {
    await expect(page.getByText(`Job ${jobName} submitted.`).first()).toBeVisible();
  });

  await test.step('follow its log to the end', async () => {
    const job = page.locator(`.jp-hyperpod-JobView[data-job="${jobName}"]`);
    await expect(job).toBeVisible();
    // The Pause button: JupyterLab's pauseIcon from 4.4, the panel's own before.
    await expect(job.getByRole('button', { name: /Pause/ })).toBeVisible();
    const terminal = job.locator('.jp-hyperpod-Terminal .xterm-rows');
    await expect(terminal).toContainText('step 02/16');
    await expect(terminal).toContainText('training finished', { timeout: 60000 });
    await expect(job.locator('.jp-hyperpod-JobHeader .jp-hyperpod-Badge')).toHaveText(
      'SUCCEEDED',
      { timeout: 30000 }
    );
    await expect(job.locator('.jp-hyperpod-ViewError')).toHaveCount(0);
  });

  expect(problems, 'browser console messages naming the extension').toEqual([]);
});
