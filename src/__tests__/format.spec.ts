import {
  breadcrumbs,
  formatAge,
  formatBytes,
  formatDuration,
  formatMemory,
  isSubmittable,
  jobDuration,
  joinPath,
  toPartitionPath
} from '../format';

describe('sizes', () => {
  it('reads like a file browser', () => {
    expect(formatBytes(0)).toBe('0 B');
    expect(formatBytes(1023)).toBe('1023 B');
    expect(formatBytes(1536)).toBe('1.5 KB');
    expect(formatBytes(10 * 1024 * 1024)).toBe('10 MB');
    expect(formatBytes(5.5 * 1024 ** 4)).toBe('5.5 TB');
    expect(formatBytes(-1)).toBe('—');
    expect(formatMemory(24105)).toBe('24 GB');
  });
});

describe('durations and ages', () => {
  it('is short and exact enough', () => {
    expect(formatDuration(0)).toBe('0s');
    expect(formatDuration(59.9)).toBe('59s');
    expect(formatDuration(200)).toBe('3m 20s');
    expect(formatDuration(3600)).toBe('1h');
    expect(formatDuration(7500)).toBe('2h 5m');
    expect(formatDuration(3 * 86400 + 4 * 3600)).toBe('3d 4h');
    expect(formatDuration(NaN)).toBe('—');
  });

  it('tells how long ago', () => {
    const now = 1_000_000 * 1000;
    expect(formatAge(1_000_000 - 2, now)).toBe('just now');
    expect(formatAge(1_000_000 - 300, now)).toBe('5m ago');
    expect(formatAge(1_000_000 + 10, now)).toBe('just now'); // clock skew
    expect(formatAge(null, now)).toBe('—');
  });

  it('measures a running or ended job', () => {
    expect(jobDuration(100, 160)).toBe('1m');
    expect(jobDuration(100, null, 130 * 1000)).toBe('30s');
    expect(jobDuration(null, null)).toBe('—');
  });
});

describe('paths', () => {
  it('joins and splits partition paths', () => {
    expect(joinPath('', 'a')).toBe('a');
    expect(joinPath('a/b/', '/c')).toBe('a/b/c');
    expect(breadcrumbs('a/b/c')).toEqual([
      { name: 'a', path: 'a' },
      { name: 'b', path: 'a/b' },
      { name: 'c', path: 'a/b/c' }
    ]);
    expect(breadcrumbs('')).toEqual([]);
  });

  it('maps a JupyterLab path into the partition', () => {
    expect(toPartitionPath('fs/shared/p/train.py', 'fs/shared')).toBe(
      'p/train.py'
    );
    expect(toPartitionPath('fs/shared', 'fs/shared')).toBe('');
    expect(toPartitionPath('fs/sharedother/x.py', 'fs/shared')).toBeNull();
    expect(toPartitionPath('notes/x.py', 'fs/shared')).toBeNull();
    expect(toPartitionPath('x.py', '')).toBe('x.py');
    expect(toPartitionPath('x.py', null)).toBeNull();
  });

  it('knows which files can be submitted', () => {
    expect(isSubmittable('train.py')).toBe(true);
    expect(isSubmittable('run.SH')).toBe(true);
    expect(isSubmittable('data.csv')).toBe(false);
    expect(isSubmittable('pod-finetuning.yaml')).toBe(true);
    expect(isSubmittable('ranks.sbatch')).toBe(true);
  });
});
