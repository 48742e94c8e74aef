/** Formatting helpers: sizes, ages and durations a person reads at a glance. */

const UNITS = ['B', 'KB', 'MB', 'GB', 'TB', 'PB'];

/** 1536 -> "1.5 KB" (powers of 1024, as file browsers show). */
export function formatBytes(bytes: number): string {
  if (!Number.isFinite(bytes) || bytes < 0) {
    return '—';
  }
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < UNITS.length - 1) {
    value /= 1024;
    unit += 1;
  }
  if (unit === 0) {
    return `${value} B`;
  }
  const digits = value < 10 ? 1 : 0;
  return `${value.toFixed(digits)} ${UNITS[unit]}`;
}

/** Seconds -> "45s", "3m 20s", "2h 5m", "3d 4h". */
export function formatDuration(seconds: number): string {
  if (!Number.isFinite(seconds) || seconds < 0) {
    return '—';
  }
  const s = Math.floor(seconds);
  if (s < 60) {
    return `${s}s`;
  }
  const m = Math.floor(s / 60);
  if (m < 60) {
    const rest = s % 60;
    return rest ? `${m}m ${rest}s` : `${m}m`;
  }
  const h = Math.floor(m / 60);
  if (h < 24) {
    const rest = m % 60;
    return rest ? `${h}h ${rest}m` : `${h}h`;
  }
  const d = Math.floor(h / 24);
  const rest = h % 24;
  return rest ? `${d}d ${rest}h` : `${d}d`;
}

/** A job's progress in a few words: "step 12/50 · 24% · ETA 3m 20s · loss 0.812". */
export function formatProgress(progress: {
  step: number;
  total: number;
  fraction: number;
  eta_seconds: number | null;
  loss: number | null;
}): string {
  const parts = [
    `step ${progress.step}/${progress.total}`,
    `${Math.floor(progress.fraction * 100)}%`
  ];
  if (progress.eta_seconds !== null && progress.fraction < 1) {
    parts.push(`ETA ${formatDuration(progress.eta_seconds)}`);
  }
  if (progress.loss !== null) {
    parts.push(`loss ${formatLoss(progress.loss)}`);
  }
  return parts.join(' · ');
}

/** A loss with three significant digits, small ones in exponent form. */
export function formatLoss(loss: number): string {
  if (loss !== 0 && Math.abs(loss) < 0.001) {
    return loss.toExponential(2);
  }
  return Number(loss.toPrecision(3)).toString();
}

/** Epoch seconds -> "5m ago" relative to `now` (epoch ms). */
export function formatAge(
  epochSeconds: number | null,
  now = Date.now()
): string {
  if (epochSeconds === null || epochSeconds === undefined) {
    return '—';
  }
  const seconds = Math.max(0, now / 1000 - epochSeconds);
  if (seconds < 5) {
    return 'just now';
  }
  return `${formatDuration(seconds)} ago`;
}

/** Epoch seconds -> a local date and time, short. */
export function formatDate(epochSeconds: number | null): string {
  if (epochSeconds === null || epochSeconds === undefined) {
    return '—';
  }
  const date = new Date(epochSeconds * 1000);
  return date.toLocaleString(undefined, {
    year: 'numeric',
    month: 'short',
    day: 'numeric',
    hour: '2-digit',
    minute: '2-digit'
  });
}

/** Epoch seconds -> a compact date for narrow columns: "14:05" today, "Nov 30", "2025-03-01". */
export function formatShortDate(
  epochSeconds: number | null,
  now = new Date()
): string {
  if (epochSeconds === null || epochSeconds === undefined) {
    return '—';
  }
  const date = new Date(epochSeconds * 1000);
  const pad = (n: number) => String(n).padStart(2, '0');
  if (date.toDateString() === now.toDateString()) {
    return `${pad(date.getHours())}:${pad(date.getMinutes())}`;
  }
  if (date.getFullYear() === now.getFullYear()) {
    return date.toLocaleDateString(undefined, {
      month: 'short',
      day: 'numeric'
    });
  }
  return `${date.getFullYear()}-${pad(date.getMonth() + 1)}-${pad(date.getDate())}`;
}

/** Megabytes of memory -> "64 GB". */
export function formatMemory(megabytes: number): string {
  return formatBytes(megabytes * 1024 * 1024);
}

/** How long a job ran (or has been running). */
export function jobDuration(
  started: number | null,
  ended: number | null,
  now = Date.now()
): string {
  if (started === null || started === undefined) {
    return '—';
  }
  const end = ended ?? now / 1000;
  return formatDuration(end - started);
}

/** Join partition-relative path parts: ('a/b', 'c') -> 'a/b/c'; ('', 'c') -> 'c'. */
export function joinPath(...parts: string[]): string {
  return parts
    .flatMap(part => part.split('/'))
    .filter(part => part.length > 0)
    .join('/');
}

/** 'a/b/c' -> [{name:'a', path:'a'}, {name:'b', path:'a/b'}, ...]. */
export function breadcrumbs(path: string): { name: string; path: string }[] {
  const crumbs: { name: string; path: string }[] = [];
  let current = '';
  for (const part of path.split('/').filter(p => p.length > 0)) {
    current = current ? `${current}/${part}` : part;
    crumbs.push({ name: part, path: current });
  }
  return crumbs;
}

/** Scripts that can be submitted as a job. */
export function isSubmittable(name: string): boolean {
  // Programs (the Submit form), and manifests and sbatch scripts (submitted as they are).
  return /\.(py|sh|bash|ya?ml|sbatch|slurm)$/i.test(name);
}

/**
 * A JupyterLab contents path as a partition-relative path, or null when it is outside the
 * partition. `partitionContents` is the partition's contents path ('' = the server root).
 */
export function toPartitionPath(
  contentsPath: string,
  partitionContents: string | null
): string | null {
  if (partitionContents === null) {
    return null;
  }
  const file = joinPath(contentsPath);
  const root = joinPath(partitionContents);
  if (!root) {
    return file;
  }
  if (file === root) {
    return '';
  }
  return file.startsWith(root + '/') ? file.slice(root.length + 1) : null;
}
