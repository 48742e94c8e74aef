/**
 * Compare (#24 item 2): two jobs selected in the Jobs list open one comparison tab in the main
 * area, the same tab for the same pair; their MLflow curves are overlaid, one colour per job
 * (its column's swatch), following the theme; the code file edited between them shows its
 * diff, collapsed, and a long line scrolls inside its <pre>, never the page; the tab is back
 * after a reload.
 */
import { expect, test } from '@jupyterlab/galata';

import { fitsInPanel, openPanel, shot, showView, stateOf, submit } from './helpers';

test.use({ autoGoto: true });

async function writeScript(page: any, name: string, text: string): Promise<void> {
  const response = await page.request.put(`/api/contents/fs/shared/project/${name}`, {
    data: { type: 'file', format: 'text', content: text }
  });
  expect(response.ok()).toBe(true);
}

/** A training-like script: ten steps of loss and learning rate in MLflow, tagged with the job. */
function curvesScript(lrLine: string): string {
  return [
    'import os',
    'import mlflow',
    lrLine,
    'mlflow.set_tracking_uri(os.environ["MLFLOW_TRACKING_URI"])',
    'mlflow.set_experiment("hyperpod-ui-demo")',
    'tags = {"hyperpod.job_id": os.environ.get("HYPERPOD_JOB_ID", "")}',
    'with mlflow.start_run(run_name=os.environ.get("HYPERPOD_JOB_NAME", "cmp"), tags=tags):',
    '    for step in range(1, 11):',
    '        loss = 2.0 / (1 + LR * 1e4 * step)',
    '        mlflow.log_metrics({"loss": loss, "learning_rate": LR}, step=step)',
    'print("lr", LR)',
    ''
  ].join('\n');
}

test('two selected jobs: Compare opens one tab with the table, the curves and the diff', async ({
  page
}) => {
  const stamp = Date.now() % 100000;
  const script = `cmp_${stamp}.py`;
  await writeScript(page, script, curvesScript('LR = 1e-4'));
  const a = await submit(page, `cmp-a-${stamp}`, `project/${script}`);
  // One job at a time on the MLflow store: a second writer racing the first one's schema
  // migration of a fresh sqlite store breaks it.
  await expect.poll(() => stateOf(page, a), { timeout: 90000 }).toBe('SUCCEEDED');
  await writeScript(page, script, curvesScript(`LR = 5e-4  # ${'long line '.repeat(60)}`));
  const b = await submit(page, `cmp-b-${stamp}`, `project/${script}`);
  await expect.poll(() => stateOf(page, b), { timeout: 90000 }).toBe('SUCCEEDED');
  await openPanel(page);
  await showView(page, 'jobs');
  await page.getByLabel(`Select cmp-a-${stamp}`).check();
  await expect(page.getByRole('button', { name: 'Compare 1' })).toBeDisabled();
  await page.getByLabel(`Select cmp-b-${stamp}`).check();
  // Beside Cancel and Remove, inside the sidebar at its default width (about 250 px).
  await fitsInPanel(page, '.jp-hyperpod-BulkBar-compare');
  await fitsInPanel(page, '.jp-hyperpod-BulkBar-remove');
  await page.getByRole('button', { name: 'Compare 2' }).click();

  const view = page.locator('.jp-hyperpod-CompareView');
  await expect(view).toBeVisible();
  const table = view.getByRole('table', { name: 'Jobs side by side' });
  // One column per job, oldest first (the diff runs from a to b).
  await expect(table.locator('thead th')).toHaveText(['Job', `cmp-a-${stamp}`, `cmp-b-${stamp}`]);
  await expect(table.locator('tr[data-row="state"] td')).toHaveText(['SUCCEEDED', 'SUCCEEDED']);
  await expect(table.locator('tr[data-row="metric:loss"] td')).toHaveCount(2);

  // The curves: training first (loss, then the learning rate), one line per job named in the
  // legend, in the job's colour, which is its column's swatch.
  const curves = view.getByRole('region', { name: 'Metric curves' });
  const training = curves.getByRole('group', { name: 'Training curves' });
  await expect(training.locator('.jp-hyperpod-Chart')).toHaveCount(2, { timeout: 60000 });
  expect(
    await training
      .locator('.jp-hyperpod-Chart')
      .evaluateAll(figures => figures.map(f => f.getAttribute('data-metric')))
  ).toEqual(['loss', 'learning_rate']);
  const loss = training.locator('.jp-hyperpod-Chart[data-metric="loss"]');
  await expect(loss.locator('canvas')).toHaveCount(1);
  await expect(loss.locator('.u-legend .u-series .u-label')).toHaveText([
    'step',
    `cmp-a-${stamp}`,
    `cmp-b-${stamp}`
  ]);
  await expect(curves.getByRole('list', { name: 'Jobs without curves' })).toHaveCount(0);
  // The tab, taller than the main area now, scrolls inside itself; the table keeps its height.
  const fit = await table.evaluate(t => ({
    table: t.offsetHeight,
    scroller: t.parentElement!.clientHeight
  }));
  expect(fit.table).toBeGreaterThan(100);
  expect(fit.scroller).toBeGreaterThanOrEqual(fit.table);
  const plot = loss.locator('.jp-hyperpod-Chart-plot');
  const colours = async () =>
    ((await plot.getAttribute('data-line-colors')) ?? '').split(' ').filter(Boolean);
  const light = await colours();
  expect(light).toHaveLength(2);
  expect(light[0]).not.toBe(light[1]);
  // Each column's swatch is painted in its job's line colour (both read as rgb()).
  const rgb = (colour: string) =>
    page.evaluate(c => {
      const probe = document.createElement('span');
      probe.style.color = c;
      document.body.appendChild(probe);
      const value = getComputedStyle(probe).color;
      probe.remove();
      return value;
    }, colour);
  const swatches = await table
    .locator('thead .jp-hyperpod-Swatch')
    .evaluateAll(spans => spans.map(s => getComputedStyle(s).backgroundColor));
  expect(swatches).toEqual([await rgb(light[0]), await rgb(light[1])]);

  const code = view.getByRole('region', { name: 'Code' });
  const file = code.locator(`li[data-path="${script}"]`);
  await expect(file).toContainText('changed');
  const details = file.locator('details');
  await expect(details).not.toHaveAttribute('open', '');
  await file.locator('summary').click();
  const pre = file.locator('pre.jp-hyperpod-Diff-text');
  await expect(pre).toContainText('-LR = 1e-4');
  await expect(pre).toContainText('+LR = 5e-4');
  // The long line scrolls inside its <pre>; the tab itself does not scroll sideways.
  const widths = await pre.evaluate(el => ({ scroll: el.scrollWidth, client: el.clientWidth }));
  expect(widths.scroll).toBeGreaterThan(widths.client);
  const tab = await view.evaluate(el => ({ scroll: el.scrollWidth, client: el.clientWidth }));
  expect(tab.scroll).toBeLessThanOrEqual(tab.client + 1);
  // The tab scrolls inside itself (its diff runs below the fold): shown from its top.
  await view.evaluate(el => (el.scrollTop = 0));
  await shot(page, 'compare.png');

  // The same pair again: the same tab, not a second one.
  await showView(page, 'jobs');
  await page.getByRole('button', { name: 'Compare 2' }).click();
  await expect(page.locator('.jp-hyperpod-CompareView')).toHaveCount(1);

  // After a reload the comparison is back, on the same jobs (once the layout is saved).
  await expect
    .poll(
      () =>
        page.evaluate(async () =>
          JSON.stringify(await (await fetch('/lab/api/workspaces/default')).json())
        ),
      { timeout: 15000 }
    )
    .toContain(`jupyter-hyperpod-compare:${[a, b].sort().join(',')}`);
  await page.reload({ waitForIsReady: false });
  await expect(
    page.locator('.jp-hyperpod-CompareTable thead th')
  ).toHaveText(['Job', `cmp-a-${stamp}`, `cmp-b-${stamp}`], { timeout: 30000 });
  await expect(page.locator('.lm-TabBar-tab', { hasText: `Compare: cmp-a-${stamp}` })).toHaveCount(1);

  // The curves follow a theme switch: drawn again in the dark theme's colours.
  const restored = page.locator('.jp-hyperpod-CompareView .jp-hyperpod-Chart[data-metric="loss"]');
  await expect(restored.locator('canvas')).toHaveCount(1, { timeout: 30000 });
  await page.theme.setDarkTheme();
  await expect
    .poll(async () => await restored.locator('.jp-hyperpod-Chart-plot').getAttribute('data-line-colors'))
    .not.toBe(light.join(' '));
  await page.theme.setLightTheme();
});
