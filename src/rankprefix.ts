/**
 * Prefixes each line with its rank when several ranks share one view ("all ranks"), keeping
 * carriage returns (progress bars) working within a rank's line.
 */
export class RankPrefixer {
  constructor(readonly enabled: boolean) {}

  format(rank: number, text: string): string {
    if (!this.enabled || !text) {
      return text;
    }
    const prefix = `\x1b[36m[${rank}]\x1b[0m `;
    let out = '';
    const last = this._lastRank;
    if (last !== null && last !== rank && !this._atLineStart.get(last)) {
      // Another rank's line is unfinished: end it here; its rest gets its own prefix.
      out += '\n';
      this._atLineStart.set(last, true);
    }
    let atStart = this._atLineStart.get(rank) ?? true;
    for (const char of text) {
      if (atStart && char !== '\n') {
        out += prefix;
        atStart = false;
      }
      if (char === '\r') {
        out += '\r' + prefix;
        continue;
      }
      out += char;
      if (char === '\n') {
        atStart = true;
      }
    }
    this._atLineStart.set(rank, atStart);
    this._lastRank = rank;
    return out;
  }

  private _atLineStart = new Map<number, boolean>();
  private _lastRank: number | null = null;
}
