import {
  groupMetricNames,
  metricSeries,
  smooth,
  sortMetricNames
} from '../metrics';
import { filterNodes, summarizeNodes, visibleRange } from '../nodes';
import { RankPrefixer } from '../rankprefix';
import { DEFAULT_SETTINGS, readSettings } from '../settings';
import { makeNode } from './fixtures';

describe('nodes', () => {
  const nodes = Array.from({ length: 2000 }, (_, i) => makeNode(i));

  it('sums health and GPUs over the cluster', () => {
    const summary = summarizeNodes(nodes);
    expect(summary.nodes).toBe(2000);
    expect(summary.unhealthy).toBe(200);
    expect(summary.healthy).toBe(1800);
    expect(summary.gpusTotal).toBe(16000);
    expect(summary.gpusAllocated).toBe(667 * 8);
    expect(summary.states).toEqual(['allocated', 'drained', 'idle']);
  });

  it('filters by name, type, state and health', () => {
    expect(
      filterNodes(nodes, { text: 'ip-10-1-7-', state: '', health: '' })
    ).toHaveLength(250);
    expect(
      filterNodes(nodes, { text: 'P5.48', state: '', health: '' })
    ).toHaveLength(1000);
    expect(
      filterNodes(nodes, { text: '', state: 'drained', health: '' })
    ).toHaveLength(200);
    expect(
      filterNodes(nodes, { text: '', state: '', health: 'unhealthy' })
    ).toHaveLength(200);
    expect(
      filterNodes(nodes, { text: 'nothing', state: '', health: '' })
    ).toHaveLength(0);
  });

  it('draws only the rows in view', () => {
    expect(visibleRange(0, 480, 48, 2000, 8)).toEqual([0, 26]);
    expect(visibleRange(48 * 1000, 480, 48, 2000, 8)).toEqual([992, 1018]);
    expect(visibleRange(48 * 1995, 480, 48, 2000, 8)).toEqual([1987, 2000]);
    expect(visibleRange(0, 480, 48, 0)).toEqual([0, 0]);
  });
});

describe('rank prefixes', () => {
  it('leaves a single rank alone', () => {
    expect(new RankPrefixer(false).format(0, 'a\nb')).toBe('a\nb');
  });

  it('prefixes each line of each rank, across chunks', () => {
    const p = new RankPrefixer(true);
    const strip = (s: string) => s.replace(/\x1b\[[0-9;]*m/g, '');
    expect(strip(p.format(0, 'a\nb'))).toBe('[0] a\n[0] b');
    expect(strip(p.format(0, 'c\n'))).toBe('c\n');
    expect(strip(p.format(1, 'x\n'))).toBe('[1] x\n');
    // rank 2 is interrupted by rank 3 mid-line: rank 3 starts on a fresh line
    expect(strip(p.format(2, 'half'))).toBe('[2] half');
    expect(strip(p.format(3, 'y\n'))).toBe('\n[3] y\n');
    expect(strip(p.format(2, ' done\n'))).toBe('[2]  done\n');
  });

  it('keeps progress bars (carriage returns) on their rank', () => {
    const p = new RankPrefixer(true);
    const strip = (s: string) => s.replace(/\x1b\[[0-9;]*m/g, '');
    expect(strip(p.format(0, '10%\r20%'))).toBe('[0] 10%\r[0] 20%');
  });
});

describe('metrics', () => {
  it('orders points by step, the last value of a step winning', () => {
    expect(
      metricSeries([
        { step: 2, value: 0.5, timestamp: 3 },
        { step: 1, value: 0.9, timestamp: 1 },
        { step: 2, value: 0.4, timestamp: 4 },
        { step: 3, value: NaN, timestamp: 5 }
      ])
    ).toEqual([
      [1, 2],
      [0.9, 0.4]
    ]);
  });

  it('puts the usual curves first', () => {
    expect(
      sortMetricNames(['zeta', 'learning_rate', 'eval_loss', 'alpha', 'loss'])
    ).toEqual(['loss', 'eval_loss', 'learning_rate', 'alpha', 'zeta']);
  });

  it('puts training metrics first and system ones apart', () => {
    expect(
      groupMetricNames([
        'system/gpu_0_utilization_percentage',
        'tokens_per_second',
        'loss',
        'system/cpu_utilization_percentage'
      ])
    ).toEqual({
      training: ['loss', 'tokens_per_second'],
      system: [
        'system/cpu_utilization_percentage',
        'system/gpu_0_utilization_percentage'
      ]
    });
  });

  it('smooths like TensorBoard (debiased EMA), or not at all', () => {
    expect(smooth([1, 2, 3], 0)).toEqual([1, 2, 3]);
    const out = smooth([2, 2, 2], 0.9);
    out.forEach(v => expect(v).toBeCloseTo(2, 10));
    const [a, b] = smooth([0, 10], 0.5);
    expect(a).toBe(0);
    expect(b).toBeCloseTo((0.5 * 0.5 * 0 + 0.5 * 10) / (1 - 0.25), 10);
  });
});

describe('settings', () => {
  it('replaces missing or bad values by the defaults', () => {
    expect(readSettings({})).toEqual(DEFAULT_SETTINGS);
    expect(
      readSettings({
        refreshInterval: 0,
        logTailLines: 'many',
        defaultView: 'bogus',
        defaultTemplate: 'qlora',
        filesPageSize: 100,
        jobTabs: 'several'
      })
    ).toEqual({
      refreshInterval: 2,
      logTailLines: 1000,
      defaultView: 'cluster',
      defaultTemplate: 'qlora',
      filesPageSize: 100,
      notifyJobEnd: true,
      jobTabs: 'one'
    });
    expect(readSettings({ notifyJobEnd: false }).notifyJobEnd).toBe(false);
    expect(readSettings({ jobTabs: 'per-job' }).jobTabs).toBe('per-job');
  });
});
