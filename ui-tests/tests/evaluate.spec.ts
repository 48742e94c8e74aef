/**
 * An evaluation in its job's Metrics tab (#25 item 4): the base-vs-fine-tuned table of every
 * ROUGE variant with the delta, the scores not repeated as cards, and "Open in MLflow".
 */
import { expect, test } from '@jupyterlab/galata';

import { openJob, openPanel, shot, stateOf, submit } from './helpers';

test('evaluate: fine-tuned vs base, every ROUGE variant with its delta', async ({
  page
}) => {
  const name = `scores-${Date.now() % 100000}`;
  const id = await submit(page, name, 'project/scores.py');
  await expect
    .poll(() => stateOf(page, id), { timeout: 90000 })
    .toBe('SUCCEEDED');
  await openPanel(page);
  await openJob(page, id, 'metrics');
  const job = page.locator(`.jp-hyperpod-JobView[data-job="${name}"]`);
  const table = job.getByRole('table', { name: 'ROUGE: fine-tuned vs base' });
  await expect(table).toBeVisible({ timeout: 90000 });
  await expect(table.locator('tbody tr')).toHaveText([
    /rouge1\s*0\.0867\s*0\.4123\s*\+0\.3256/,
    /rouge2\s*0\.0212\s*0\.1834\s*\+0\.1622/,
    /rougeL\s*0\.0795\s*0\.3311\s*\+0\.2516/,
    /rougeLsum\s*0\.0841\s*0\.3902\s*\+0\.3061/
  ]);
  await expect(
    job.getByText('Mean F1 on 16 test examples, up to 96 new tokens.')
  ).toBeVisible();
  // The scores are in the table only; the run's curve is folded below it.
  await expect(job.locator('[data-metric^="eval_"]')).toHaveCount(0);
  await expect(job.locator('[data-metric="loss"]')).toHaveCount(1);
  const link = job.getByRole('link', { name: 'Open in MLflow' });
  await expect(link).toHaveAttribute(
    'href',
    /^http:\/\/127\.0\.0\.1:5000\/#\/experiments\/\d+\/runs\/[0-9a-f]+$/
  );
  // Nothing cut at the tab's right edge, and the same in the dark theme.
  const view = await job.boundingBox();
  const box = await table.boundingBox();
  expect(box!.x + box!.width).toBeLessThanOrEqual(view!.x + view!.width + 1);
  await shot(page, 'evaluate.png');
  await page.theme.setDarkTheme();
  await expect(
    table.locator('.jp-hyperpod-Delta.jp-mod-up').first()
  ).toBeVisible();
});
