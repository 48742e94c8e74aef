/**
 * Job depth in the panel, at JupyterLab's default sidebar width (about 250 px) and at full
 * width: one spec from the form (no silent overrides), errors that say what is wrong, why a job
 * failed or waits, notifications, progress, remove and bulk actions, tabs after a reload, charts
 * that follow the theme.
 */
import { expect, test } from '@jupyterlab/galata';

import {
  cancel,
  fitsInPanel,
  LOADED,
  openJob,
  openPanel,
  PANEL,
  shot,
  showView,
  stateOf,
  submit,
  VIEWS
} from './helpers';

test.use({ autoGoto: true });

test('the default sidebar width: nothing cut, Connect asks for what it needs', async ({ page }) => {
  await openPanel(page);
  const width = (await page.locator('#jupyter-hyperpod-panel').boundingBox())!.width;
  expect(width).toBeLessThan(300);
  await showView(page, 'cluster');
  await expect(page.locator('.jp-hyperpod-NodeRow').first()).toBeVisible();
  const connect = page.getByRole('button', { name: 'Connect to a HyperPod cluster' });
  if (await connect.count()) {
    await fitsInPanel(page, '.jp-hyperpod-AwsConnect-toggle');
    await expect(connect).toBeEnabled();
    await connect.click();
    // No AWS here: the server knows no region, so the panel asks for one.
    await expect(page.getByLabel('AWS region')).toBeVisible();
    await fitsInPanel(page, '.jp-hyperpod-AwsConnect-region');
  }
  await showView(page, 'files');
  await page.locator('.jp-hyperpod-FileRow[data-path="project"] .jp-hyperpod-FileCol-name').click();
  const name = page.locator(
    '.jp-hyperpod-FileRow[data-path="project/curves.py"] .jp-hyperpod-FileName'
  );
  await expect(name).toBeVisible();
  // The whole name shows, not its first six characters.
  expect(await name.evaluate(e => e.scrollWidth <= e.clientWidth)).toBe(true);
  await fitsInPanel(page, '.jp-hyperpod-FileRow[data-path="project/curves.py"]');
});

test('250 px: every tab whole and reachable, no view wider than the panel', async ({ page }) => {
  const name = `narrow-${Date.now() % 100000}`;
  const id = await submit(page, name, 'project/sleep.py');
  await expect.poll(() => stateOf(page, id), { timeout: 30000 }).toBe('RUNNING');
  await openPanel(page);
  // JupyterLab's default sidebar width, set explicitly so the check does not depend on it.
  await page.sidebar.setWidth(250, 'left');
  const panel = page.locator(PANEL);
  await expect.poll(async () => Math.round((await panel.boundingBox())!.width)).toBeLessThan(252);
  const outer = (await panel.boundingBox())!;
  // Nothing of the tab row hides behind a scroll or the panel's edge.
  const tabs = page.locator('.jp-hyperpod-Tabs');
  expect(await tabs.evaluate(e => e.scrollWidth <= e.clientWidth)).toBe(true);
  for (const view of VIEWS) {
    const tab = page.locator(`#jp-hyperpod-tab-${view}`);
    const box = (await tab.boundingBox())!;
    expect(box.x, `tab ${view}`).toBeGreaterThanOrEqual(outer.x - 1);
    expect(box.x + box.width, `tab ${view}`).toBeLessThanOrEqual(outer.x + outer.width + 1);
    // Its label is whole, not cut to "Sub".
    expect(await tab.evaluate(e => e.scrollWidth <= e.clientWidth), `tab ${view}`).toBe(true);
  }
  for (const view of VIEWS) {
    await showView(page, view);
    const shown = page.locator(`#jp-hyperpod-view-${view}`);
    await expect(shown.locator(LOADED[view]).first()).toBeVisible({ timeout: 30000 });
    await expect(shown.locator('.jp-hyperpod-Loading')).toHaveCount(0);
    // The view and every scrolling box in it are no wider than what they show.
    const wide = await shown.evaluate(root =>
      [root, ...Array.from(root.querySelectorAll<HTMLElement>('.jp-hyperpod-View'))]
        .filter(e => e.scrollWidth > e.clientWidth)
        .map(e => `${e.className}: ${e.scrollWidth} > ${e.clientWidth}`)
    );
    expect(wide, `view ${view}`).toEqual([]);
  }
  await cancel(page, id);
  await expect.poll(() => stateOf(page, id), { timeout: 30000 }).toBe('CANCELLED');
});

test('full width: the views spread out', async ({ page }) => {
  await openPanel(page);
  await page.sidebar.setWidth(900, 'left');
  await showView(page, 'files');
  await page.locator('.jp-hyperpod-FileRow[data-path="project"] .jp-hyperpod-FileCol-name').click();
  const row = page.locator('.jp-hyperpod-FileRow[data-path="project/train.py"]');
  await expect(row.locator('.jp-hyperpod-FileCol-mtime')).toBeVisible();
  await showView(page, 'submit');
  await expect(page.locator('.jp-hyperpod-Preview')).toBeVisible();
  await fitsInPanel(page, '.jp-hyperpod-SubmitButton');
});

test('one spec: the form sends only what the user set and shows the config values', async ({
  page
}) => {
  await openPanel(page);
  await showView(page, 'submit');
  await page.locator('#jp-hyperpod-template').selectOption('qlora-finetune');
  await page.locator('#jp-hyperpod-param-config').fill('qlora/args.yaml');
  const preview = page.locator('.jp-hyperpod-Preview-text');
  await expect(preview).toContainText('--config args.yaml');
  // Untouched boxes and numbers are not sent: the config decides (it says packing: true).
  await expect(preview).not.toContainText('--set');
  await expect(page.locator('#jp-hyperpod-param-max_steps')).toHaveAttribute('placeholder', '7');
  await expect(page.locator('#jp-hyperpod-param-packing')).toBeChecked();
  await expect(page.locator('#jp-hyperpod-param-model_id')).toHaveAttribute(
    'placeholder',
    'qlora/model'
  );
  // What the user changes is sent, and only that.
  await page.locator('#jp-hyperpod-param-max_steps').fill('3');
  await expect(preview).toContainText('--set max_steps=3');
  await expect(preview).not.toContainText('packing');
  await preview.scrollIntoViewIfNeeded();
  await shot(page, 'submit-config.png');
});

test('a refused path is said as such, not as a sign-in problem', async ({ page }) => {
  await openPanel(page);
  await showView(page, 'submit');
  await page.locator('#jp-hyperpod-template').selectOption('script');
  await page.locator('#jp-hyperpod-param-script').fill('../../etc/passwd');
  const error = page.locator('[data-field="script"] .jp-hyperpod-Field-error');
  await expect(error).toBeVisible();
  await expect(error).not.toContainText('signed in');
  await expect(error).toContainText(/partition/);
});

test('a failed job opens on the rank that failed first, with why', async ({ page }) => {
  const name = `fails-${Date.now() % 100000}`;
  const id = await submit(page, name, 'project/fail.py', { procs_per_node: 2 });
  await expect.poll(() => stateOf(page, id), { timeout: 60000 }).toBe('FAILED');
  await openPanel(page);
  await openJob(page, id);
  const job = page.locator(`.jp-hyperpod-JobView[data-job="${name}"]`);
  const why = job.getByRole('region', { name: 'Why the job failed' });
  await expect(why).toContainText('Rank 1 failed first');
  await expect(why).toContainText('rank 1 exited with code 3');
  await expect(why.getByLabel('Last lines of rank 1')).toContainText(
    'ValueError: rank 1 ran out of data'
  );
  await expect(job.getByLabel('Rank', { exact: true })).toHaveValue('1');
  await expect(job.locator('.jp-hyperpod-Terminal .xterm-rows')).toContainText('rank 1 working 2');
  await expect(job.locator('.jp-hyperpod-LogStatus')).toContainText(
    'The job ended: FAILED (rank 1 exited with code 3).'
  );
  await shot(page, 'job-failed.png');
});

test('a pending job says why it waits; bulk cancel asks once', async ({ page }) => {
  const stamp = Date.now() % 100000;
  const ids = [
    await submit(page, `busy-a-${stamp}`, 'project/sleep.py'),
    await submit(page, `busy-b-${stamp}`, 'project/sleep.py'),
    await submit(page, `busy-c-${stamp}`, 'project/sleep.py')
  ];
  await openPanel(page);
  await showView(page, 'jobs');
  const waiting = page.locator(`.jp-hyperpod-JobRow[data-job="busy-c-${stamp}"]`);
  await expect(waiting).toHaveAttribute('data-state', 'PENDING', { timeout: 30000 });
  await expect(waiting.locator('.jp-hyperpod-JobRow-why')).toContainText('waiting for a free slot');
  for (const suffix of ['a', 'b', 'c']) {
    await page.getByLabel(`Select busy-${suffix}-${stamp}`).check();
  }
  await page.getByRole('button', { name: 'Cancel 3' }).click();
  const dialog = page.locator('.jp-Dialog');
  await expect(dialog).toContainText('Cancel 3 jobs?');
  await dialog.locator('.jp-Dialog-button.jp-mod-warn').click();
  for (const id of ids) {
    await expect.poll(() => stateOf(page, id), { timeout: 30000 }).toBe('CANCELLED');
  }
});

test('progress and ETA, a notification when the job ends, tabs after a reload', async ({
  page
}) => {
  const name = `progress-${Date.now() % 100000}`;
  const id = await submit(page, name, 'project/train.py');
  await openPanel(page);
  await showView(page, 'jobs');
  const row = page.locator(`.jp-hyperpod-JobRow[data-job="${name}"]`);
  const progress = row.getByRole('progressbar');
  await expect(progress).toContainText(/step \d+\/16/, { timeout: 30000 });
  await expect(progress).toContainText('loss');
  await fitsInPanel(page, `.jp-hyperpod-JobRow[data-job="${name}"] .jp-hyperpod-Progress`);
  await shot(page, 'jobs-progress.png');
  // The job ends while the user looks elsewhere: a notification with a button that opens it.
  await showView(page, 'files');
  const toast = page.locator('.Toastify__toast', { hasText: `Job ${name} succeeded.` });
  await expect(toast).toBeVisible({ timeout: 60000 });
  await toast.getByRole('button', { name: 'Open job' }).click();
  const job = page.locator(`.jp-hyperpod-JobView[data-job="${name}"]`);
  await expect(job).toBeVisible();
  // After a reload the job's tab is back (once JupyterLab has saved the layout).
  await expect
    .poll(
      () =>
        page.evaluate(async () =>
          JSON.stringify(await (await fetch('/lab/api/workspaces/default')).json())
        ),
      { timeout: 15000 }
    )
    .toContain(`jupyter-hyperpod-job:${id}`);
  // (Galata's default wait is for the launcher, which a restored job tab hides.)
  await page.reload({ waitForIsReady: false });
  await expect(page.locator(`.jp-hyperpod-JobView[data-job="${name}"]`)).toBeVisible({
    timeout: 30000
  });
  expect(await stateOf(page, id)).toBe('SUCCEEDED');
});

test('remove a job from the history, its files kept or deleted', async ({ page }) => {
  const stamp = Date.now() % 100000;
  const keep = await submit(page, `keep-${stamp}`, 'project/sleep.py');
  const drop = await submit(page, `drop-${stamp}`, 'project/sleep.py');
  await cancel(page, keep);
  await cancel(page, drop);
  await openPanel(page);
  await showView(page, 'jobs');
  const keepRow = page.locator(`.jp-hyperpod-JobRow[data-job="keep-${stamp}"]`);
  await expect(keepRow).toHaveAttribute('data-state', 'CANCELLED', { timeout: 30000 });
  await keepRow.getByRole('button', { name: `Remove keep-${stamp} from the history` }).click();
  const dialog = page.locator('.jp-Dialog');
  await expect(dialog).toContainText(`Remove keep-${stamp} from the history?`);
  await dialog.locator('.jp-Dialog-button.jp-mod-warn').click();
  await expect(keepRow).toHaveCount(0);
  expect((await page.request.get(`/hyperpod/api/jobs/${keep}`)).status()).toBe(404);
  const kept = await page.request.get(
    `/hyperpod/api/files?path=${encodeURIComponent('.hyperpod/jobs')}`
  );
  expect((await kept.json()).entries.map((e: any) => e.name)).toContain(keep);

  const dropRow = page.locator(`.jp-hyperpod-JobRow[data-job="drop-${stamp}"]`);
  await dropRow.getByRole('button', { name: `Remove drop-${stamp} from the history` }).click();
  await dialog.locator('.jp-Dialog-checkbox input, input[type="checkbox"]').first().check();
  await dialog.locator('.jp-Dialog-button.jp-mod-warn').click();
  await expect(dropRow).toHaveCount(0);
  const after = await page.request.get(
    `/hyperpod/api/files?path=${encodeURIComponent('.hyperpod/jobs')}`
  );
  expect((await after.json()).entries.map((e: any) => e.name)).not.toContain(drop);
});

test('metrics: grouped, smoothed on request, following a live theme switch', async ({
  page
}) => {
  const name = `groups-${Date.now() % 100000}`;
  const id = await submit(page, name, 'project/curves.py');
  await expect.poll(() => stateOf(page, id), { timeout: 90000 }).toBe('SUCCEEDED');
  await openPanel(page);
  await openJob(page, id, 'metrics');
  const job = page.locator(`.jp-hyperpod-JobView[data-job="${name}"]`);
  const training = job.getByRole('region', { name: 'Training metrics' });
  await expect(training.locator('.jp-hyperpod-Chart[data-metric="loss"]')).toBeVisible({
    timeout: 90000
  });
  // A single value is a number, not a dot.
  const single = training.locator('.jp-hyperpod-Chart[data-metric="final_rouge1"]');
  await expect(single).toHaveClass(/jp-mod-single/);
  await expect(single).toContainText('0.412');
  // System metrics are folded away.
  const system = job.locator('.jp-hyperpod-MetricsSystem');
  await expect(system).not.toHaveAttribute('open', '');
  await expect(
    system.locator('.jp-hyperpod-Chart[data-metric="system/cpu_utilization_percentage"]')
  ).toBeHidden();
  await job.getByLabel('Smoothing').selectOption('0.8');
  await expect(training.locator('.jp-hyperpod-Chart[data-metric="loss"]')).toContainText(
    'smoothed'
  );
  const axisColour = () =>
    job
      .locator('.jp-hyperpod-Chart[data-metric="loss"] .jp-hyperpod-Chart-plot')
      .getAttribute('data-axis-color');
  const light = await axisColour();
  await page.theme.setDarkTheme();
  await expect.poll(axisColour).not.toBe(light);
  await shot(page, 'metrics-dark.png');
});

test('the Submit form opens in the main area for large templates', async ({ page }) => {
  await openPanel(page);
  await showView(page, 'submit');
  await page.getByRole('button', { name: /Open the form in the main area/ }).click();
  const main = page.locator('#jupyter-hyperpod-submit');
  await expect(main).toBeVisible();
  await expect(main.locator('#jp-hyperpod-template')).toBeVisible();
  // One form at a time: the sidebar points to it.
  await expect(page.locator('#jp-hyperpod-view-submit')).toContainText(
    'The Submit form is open in the main area.'
  );
  await main.locator('#jp-hyperpod-template').selectOption('qlora-finetune');
  await main.locator('#jp-hyperpod-param-config').fill('qlora/args.yaml');
  await expect(main.locator('.jp-hyperpod-Preview-text')).toContainText('--config args.yaml');
  await page.locator('.jp-mod-current .lm-TabBar-tabCloseIcon').first().click();
  await expect(main).toHaveCount(0);
  await expect(page.locator('#jp-hyperpod-view-submit #jp-hyperpod-template')).toBeVisible();
});
