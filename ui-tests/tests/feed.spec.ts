/**
 * Pushed, not polled (#25 item 1): while the job feed (WebSocket `GET hyperpod/api/feed`) is up,
 * a job's change reaches its row in the Jobs list within 1 s of the tracker seeing it (the
 * `time` of the feed's event, stamped in the tracker's thread right after its refresh), and the
 * page fetches no jobs in between. With polling alone the row would wait for the next
 * `GET jobs`, up to 10 s later (the refresh interval), and this test fails: no event, or a poll.
 */
import { expect, test } from '@jupyterlab/galata';

import { cancel, openPanel, showView, submit } from './helpers';

test.use({ autoGoto: false });

/** The goal: from the tracker seeing a change to the row showing it. */
const PUSHED_WITHIN_MS = 1000;

interface IFrame {
  type: string;
  seq: number;
  time: number;
  id?: string;
  job?: { state: string };
  received: number;
}

test('a job change reaches the Jobs list within 1 s, pushed, not polled', async ({
  page
}) => {
  const frames: IFrame[] = [];
  page.on('websocket', socket => {
    if (socket.url().includes('/hyperpod/api/feed')) {
      socket.on('framereceived', frame => {
        frames.push({ ...JSON.parse(String(frame.payload)), received: Date.now() });
      });
    }
  });
  // Every fetch of jobs the page makes (the list's poll, the watch, a view's GET jobs/{id}).
  const fetches: { url: string; at: number }[] = [];
  page.on('request', request => {
    const path = new URL(request.url()).pathname;
    if (request.method() === 'GET' && /\/hyperpod\/api\/jobs(\/[^/]+)?$/.test(path)) {
      fetches.push({ url: request.url(), at: Date.now() });
    }
  });

  await page.goto('');
  await openPanel(page);
  await showView(page, 'jobs');
  // The feed says hello; the panel fetches the list once (what changed before it connected).
  await expect.poll(() => frames.some(f => f.type === 'hello')).toBe(true);
  const hello = frames.find(f => f.type === 'hello')!;
  await expect.poll(() => fetches.some(f => f.at >= hello.received)).toBe(true);
  await page.waitForLoadState('networkidle');

  // When each row first showed each state, by the page's clock (the server's: same machine).
  await page.evaluate(() => {
    const seen: Record<string, number> = {};
    (window as any).hyperpodRowStates = seen;
    new MutationObserver(() => {
      document.querySelectorAll('.jp-hyperpod-JobRow').forEach(row => {
        const key = `${row.getAttribute('data-job')}:${row.getAttribute('data-state')}`;
        seen[key] ??= Date.now();
      });
    }).observe(document.body, {
      subtree: true,
      childList: true,
      attributes: true,
      attributeFilter: ['data-state']
    });
  });

  const name = `pushed-${Date.now() % 100000}`;
  const start = Date.now();
  const id = await submit(page, name, 'project/sleep.py'); // REST: the page is not told
  const row = page.locator(`.jp-hyperpod-JobRow[data-job="${name}"]`);
  await expect(row).toHaveAttribute('data-state', 'RUNNING', { timeout: 15000 });
  await cancel(page, id); // REST again, not the panel's button
  await expect(row).toHaveAttribute('data-state', 'CANCELLED', { timeout: 15000 });
  const seen: Record<string, number> = await page.evaluate(
    () => (window as any).hyperpodRowStates
  );

  // Each new state of the row: how long after the tracker saw it (the event's time).
  const changes: { state: string; ms: number }[] = [];
  let last = '';
  for (const frame of frames) {
    if (frame.type === 'job' && frame.id === id && frame.job!.state !== last) {
      last = frame.job!.state;
      const shown = seen[`${name}:${last}`];
      expect(shown, `the row showed ${last}`).toBeDefined();
      changes.push({ state: last, ms: shown - frame.time * 1000 });
    }
  }
  console.log(`pushed to the row after the tracker saw it (ms): ${JSON.stringify(changes)}`);
  expect(changes.map(c => c.state)).toContain('RUNNING');
  expect(changes.map(c => c.state).slice(-1)).toEqual(['CANCELLED']);
  for (const change of changes) {
    expect(change.ms, `${change.state} shown ${change.ms} ms after`).toBeLessThan(
      PUSHED_WITHIN_MS
    );
  }
  // ...and not by a poll: no jobs were fetched from the submit to the last change.
  const end = seen[`${name}:CANCELLED`];
  expect(fetches.filter(f => f.at >= start && f.at <= end).map(f => f.url)).toEqual([]);
});
