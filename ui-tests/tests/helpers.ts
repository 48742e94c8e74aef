/**
 * Page helpers shared by the Galata specs: open the panel, show a view, submit through the REST
 * API, open a job, read its state, check the layout, take a screenshot for docs/screenshots/.
 */
import { expect, IJupyterLabPageFixture } from '@jupyterlab/galata';
import * as path from 'path';

export const SHOTS = path.resolve(__dirname, '..', '..', 'docs', 'screenshots');
export const PANEL = '#jupyter-hyperpod-panel';
const PANEL_TAB =
  '.jp-SideBar.jp-mod-left .lm-TabBar-tab[data-id="jupyter-hyperpod-panel"]';

/** The panel's views, in the order of its tab row. */
export const VIEWS = ['cluster', 'files', 'jobs', 'queue', 'submit'];

/** What each view shows once loaded, so that its layout is measured with content in it. */
export const LOADED: Record<string, string> = {
  cluster: '.jp-hyperpod-NodeRow',
  files: '.jp-hyperpod-FileRow',
  jobs: '.jp-hyperpod-JobRow',
  queue: '.jp-hyperpod-QueueView-summary',
  submit: '#jp-hyperpod-template'
};

/** Open the sidebar panel (at JupyterLab's default sidebar width, what a new user sees). */
export async function openPanel(page: IJupyterLabPageFixture): Promise<void> {
  const panel = page.locator(PANEL);
  if (!(await panel.isVisible())) {
    await page.locator(PANEL_TAB).click();
  }
  await expect(panel).toBeVisible();
}

export async function showView(
  page: IJupyterLabPageFixture,
  view: string
): Promise<void> {
  await page.locator(`#jp-hyperpod-tab-${view}`).click();
  await expect(page.locator(`#jp-hyperpod-view-${view}`)).toBeVisible();
}

/** Submit a demo script through the REST API; returns the job's id. */
export async function submit(
  page: IJupyterLabPageFixture,
  name: string,
  script: string,
  params: Record<string, unknown> = {}
): Promise<string> {
  const response = await page.request.post('/hyperpod/api/jobs', {
    data: { name, template: 'script', params: { script, ...params } }
  });
  expect(response.status()).toBe(201);
  return (await response.json()).id;
}

export async function cancel(
  page: IJupyterLabPageFixture,
  id: string
): Promise<void> {
  await page.request.delete(`/hyperpod/api/jobs/${id}`);
}

/** Open a job in the main area on one of its tabs (logs, metrics, details). */
export async function openJob(
  page: IJupyterLabPageFixture,
  id: string,
  tab = 'logs'
): Promise<void> {
  await page.evaluate(
    async ({ id, tab }) => {
      await (window as any).jupyterapp.commands.execute('hyperpod:open-job', {
        id,
        tab
      });
    },
    { id, tab }
  );
}

export async function stateOf(
  page: IJupyterLabPageFixture,
  id: string
): Promise<string> {
  return (await (await page.request.get(`/hyperpod/api/jobs/${id}`)).json())
    .state;
}

/** Every part of `selector` lies inside the panel (nothing cut at its right edge). */
export async function fitsInPanel(
  page: IJupyterLabPageFixture,
  selector: string
): Promise<void> {
  const panel = await page.locator(PANEL).boundingBox();
  const box = await page.locator(selector).first().boundingBox();
  expect(panel && box).toBeTruthy();
  expect(box!.x + box!.width).toBeLessThanOrEqual(panel!.x + panel!.width + 1);
}

/** A screenshot for docs/screenshots/ (no animation or caret blinking in the picture). */
export async function shot(
  page: IJupyterLabPageFixture,
  name: string
): Promise<void> {
  await page.screenshot({
    path: path.join(SHOTS, name),
    animations: 'disabled',
    caret: 'hide'
  });
}
