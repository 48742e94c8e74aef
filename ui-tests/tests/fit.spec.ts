/**
 * Every view at JupyterLab's default sidebar width (250 px) and at 450 px, light and dark: no
 * sideways overflow, no text cut without an ellipsis and a tooltip, JupyterLab's own styled
 * controls, the tab row on one line; and job views share one main-area tab (#25 item 3).
 */
import { expect, IJupyterLabPageFixture, test } from '@jupyterlab/galata';

import {
  cancel,
  LOADED,
  openJob,
  openPanel,
  PANEL,
  shot,
  showView,
  submit,
  VIEWS
} from './helpers';

test.use({ autoGoto: true });

/** What is wrong with the layout of the element `selector` (an empty list: nothing). */
async function layoutProblems(page: IJupyterLabPageFixture, selector: string): Promise<string[]> {
  return page.locator(selector).evaluate((root, panelSelector) => {
    const panel = document.querySelector(panelSelector)!.getBoundingClientRect();
    const problems: string[] = [];
    const named = (e: Element) =>
      `${e.tagName.toLowerCase()}.${String(e.className).split(' ').join('.')}` +
      (e.textContent ? ` "${e.textContent.trim().slice(0, 40)}"` : '');
    const visible = (e: HTMLElement) => e.offsetParent !== null || e === root;
    const all = [root as HTMLElement, ...Array.from(root.querySelectorAll<HTMLElement>('*'))];
    for (const e of all) {
      if (!visible(e) || e.closest('.xterm, .jp-hyperpod-Chart, canvas, svg')) {
        continue;
      }
      const style = getComputedStyle(e);
      const box = e.getBoundingClientRect();
      if (box.width === 0 || box.height === 0) {
        continue;
      }
      // Nothing reaches past the panel's right edge unless a clipping box hides it.
      if (box.right > panel.right + 1) {
        let clipped = false;
        for (let p = e.parentElement; p && p !== root.parentElement; p = p.parentElement) {
          const o = getComputedStyle(p).overflowX;
          if (o !== 'visible' && p.getBoundingClientRect().right <= panel.right + 1) {
            clipped = true;
            break;
          }
        }
        if (!clipped) {
          problems.push(`past the right edge by ${Math.round(box.right - panel.right)} px: ${named(e)}`);
        }
      }
      if (e.scrollWidth > e.clientWidth + 1) {
        if (style.overflowX === 'auto' || style.overflowX === 'scroll') {
          problems.push(`scrolls sideways (${e.scrollWidth} > ${e.clientWidth}): ${named(e)}`);
        } else if (style.overflowX === 'hidden' || style.overflowX === 'clip') {
          const tip = e.closest('[title]');
          if (style.textOverflow !== 'ellipsis' || tip === null) {
            problems.push(`text cut without an ellipsis and a tooltip: ${named(e)}`);
          }
        }
      }
    }
    // JupyterLab's styled controls, not the browser's: a select or text box with
    // JupyterLab's class, no button drawn with the browser's outset border.
    for (const control of Array.from(
      root.querySelectorAll<HTMLElement>(
        'select, input:not([type]), input[type="text"], input[type="search"], input[type="number"], button'
      )
    )) {
      if (!visible(control) || control.closest('.xterm')) {
        continue;
      }
      const styled =
        control.tagName === 'BUTTON'
          ? getComputedStyle(control).borderTopStyle !== 'outset'
          : control.classList.contains('jp-mod-styled') ||
            control.closest('.jp-select-wrapper, .jp-HTMLSelect, .jp-InputGroup') !== null;
      if (!styled) {
        problems.push(`unstyled control: ${named(control)}`);
      }
    }
    return problems;
  }, PANEL);
}

for (const theme of ['light', 'dark']) {
  for (const width of [250, 450]) {
    test(`every view fits at ${width} px, ${theme}`, async ({ page }) => {
      const name = `fit-${width}-${theme}-${Date.now() % 100000}`;
      const id = await submit(page, name, 'project/sleep.py');
      if (theme === 'dark') {
        await page.theme.setDarkTheme();
      }
      await openPanel(page);
      await page.sidebar.setWidth(width, 'left');
      const panel = page.locator(PANEL);
      await expect
        .poll(async () => Math.round((await panel.boundingBox())!.width))
        .toBeLessThan(width + 2);
      try {
        await fitEveryView(page, width, theme);
      } finally {
        await cancel(page, id);
      }
    });
  }
}

async function fitEveryView(
  page: IJupyterLabPageFixture,
  width: number,
  theme: string
): Promise<void> {
  for (const view of VIEWS) {
    await showView(page, view);
    const shown = page.locator(`#jp-hyperpod-view-${view}`);
    await expect(shown.locator(LOADED[view]).first()).toBeVisible({ timeout: 30000 });
    await expect(shown.locator('.jp-hyperpod-Loading')).toHaveCount(0);
    // The tab row is one line (a count badge on Jobs does not wrap it).
    const tops = await page
      .locator('.jp-hyperpod-Tabs [role="tab"]')
      .evaluateAll(tabs => tabs.map(t => Math.round(t.getBoundingClientRect().top)));
    expect(new Set(tops).size, `tab row at ${width} px`).toBe(1);
    expect(await layoutProblems(page, `#jp-hyperpod-view-${view}`), `view ${view}`).toEqual(
      []
    );
    if (width === 250) {
      await shot(page, `narrow-${view}${theme === 'dark' ? '-dark' : ''}.png`);
    }
  }
}

test('jobs open in one main-area tab, the one last used', async ({ page }) => {
  const stamp = Date.now() % 100000;
  const first = await submit(page, `tab-a-${stamp}`, 'project/sleep.py');
  const second = await submit(page, `tab-b-${stamp}`, 'project/sleep.py');
  await openPanel(page);
  await openJob(page, first, 'logs');
  await expect(page.locator(`.jp-hyperpod-JobView[data-job="tab-a-${stamp}"]`)).toBeVisible();
  await openJob(page, second, 'details');
  await expect(page.locator(`.jp-hyperpod-JobView[data-job="tab-b-${stamp}"]`)).toBeVisible();
  await expect(page.locator('.jp-hyperpod-JobWidget')).toHaveCount(1);
  await expect(page.locator('#jp-main-dock-panel .lm-TabBar-tab', { hasText: 'Job:' })).toHaveCount(
    1
  );
  await expect(
    page.locator('#jp-main-dock-panel .lm-TabBar-tab', { hasText: `Job: tab-b-${stamp}` })
  ).toBeVisible();
  // The same job again shows that tab, never a second one.
  await openJob(page, second, 'logs');
  await expect(page.locator('.jp-hyperpod-JobWidget')).toHaveCount(1);
  await cancel(page, first);
  await cancel(page, second);
});
