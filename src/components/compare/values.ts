/** How the comparison shows a value: absent as "–", text as is, anything else as JSON. */
export function showValue(value: unknown): string {
  if (value === null || value === undefined) {
    return '–';
  }
  if (typeof value === 'string') {
    return value;
  }
  if (typeof value === 'number') {
    return Number.isInteger(value) ? String(value) : value.toPrecision(6);
  }
  return JSON.stringify(value);
}

/** A commit as `git log --oneline` shows it, "+diff" when the workdir had changes. */
export function showCommit(commit: string | null, dirty: boolean): string {
  if (commit === null) {
    return dirty ? 'no commit' : '–';
  }
  return commit.slice(0, 7) + (dirty ? '+diff' : '');
}
