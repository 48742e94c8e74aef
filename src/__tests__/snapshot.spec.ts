import { filesLine, IJobSnapshot, ranLine } from '../snapshot';

const base: IJobSnapshot = {
  tree: '.hyperpod/snapshots/train-abc123/tree',
  workdir: 'proj',
  commit: '1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b',
  dirty: true,
  files: 12,
  bytes: 2_200_000,
  referenced: [],
  configs: ['args.yaml'],
  freeze_sha256: null,
  diff_sha256: 'ab'
};

describe('the job view says what a job ran', () => {
  it('names the commit and the diff', () => {
    expect(ranLine(base)).toBe('ran 1a2b3c4+diff');
    expect(ranLine({ ...base, dirty: false })).toBe('ran 1a2b3c4');
    expect(ranLine({ ...base, commit: null })).toBe(
      "ran the workdir's files (not a git repository)"
    );
  });

  it('counts what was copied and what was referenced', () => {
    expect(filesLine({ ...base, files: 1, bytes: 10 })).toBe(
      '1 file, 10 B copied'
    );
    const referenced = {
      ...base,
      referenced: [{ path: 'proj/models/base', size: 30 * 2 ** 30, mtime: 0 }]
    };
    expect(filesLine(referenced)).toMatch(
      /^12 files, .+ copied; 1 directory referenced \(.+\): proj\/models\/base$/
    );
  });
});
