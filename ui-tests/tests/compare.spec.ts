/**
 * Compare (#24 item 2): two jobs selected in the Jobs list open one comparison tab in the main
 * area, the same tab for the same pair; the code file edited between them shows its diff,
 * collapsed, and a long line scrolls inside its <pre>, never the page; the tab is back after a
 * reload.
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

test('two selected jobs: Compare opens one tab with the table and the diff', async ({ page }) => {
  const stamp = Date.now() % 100000;
  const script = `cmp_${stamp}.py`;
  await writeScript(page, script, 'print("lr", 1e-4)\n');
  const a = await submit(page, `cmp-a-${stamp}`, `project/${script}`);
  await writeScript(page, script, `print("lr", 5e-4)  # ${'long line '.repeat(60)}\n`);
  const b = await submit(page, `cmp-b-${stamp}`, `project/${script}`);
  for (const id of [a, b]) {
    await expect.poll(() => stateOf(page, id), { timeout: 60000 }).toBe('SUCCEEDED');
  }
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

  const code = view.getByRole('region', { name: 'Code' });
  const file = code.locator(`li[data-path="${script}"]`);
  await expect(file).toContainText('changed');
  const details = file.locator('details');
  await expect(details).not.toHaveAttribute('open', '');
  await file.locator('summary').click();
  const pre = file.locator('pre.jp-hyperpod-Diff-text');
  await expect(pre).toContainText('-print("lr", 1e-4)');
  await expect(pre).toContainText('+print("lr", 5e-4)');
  // The long line scrolls inside its <pre>; the tab itself does not scroll sideways.
  const widths = await pre.evaluate(el => ({ scroll: el.scrollWidth, client: el.clientWidth }));
  expect(widths.scroll).toBeGreaterThan(widths.client);
  const tab = await view.evaluate(el => ({ scroll: el.scrollWidth, client: el.clientWidth }));
  expect(tab.scroll).toBeLessThanOrEqual(tab.client + 1);
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
});
