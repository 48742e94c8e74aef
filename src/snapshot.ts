/**
 * What a job ran (#24 item 1): its snapshot at submit, in words for the job view.
 */
import { formatBytes } from './format';
import { IJob } from './models';

export type IJobSnapshot = NonNullable<IJob['snapshot']>;

/** "ran 1a2b3c4+diff", "ran 1a2b3c4", or "ran the workdir's files" outside git. */
export function ranLine(snapshot: IJobSnapshot): string {
  if (!snapshot.commit) {
    return "ran the workdir's files (not a git repository)";
  }
  return `ran ${snapshot.commit.slice(0, 7)}${snapshot.dirty ? '+diff' : ''}`;
}

/** "12 files, 2.1 MB copied; 1 directory referenced (27.6 GB): models/base". */
export function filesLine(snapshot: IJobSnapshot): string {
  const files = `${snapshot.files} file${snapshot.files === 1 ? '' : 's'}, ${formatBytes(
    snapshot.bytes
  )} copied`;
  const refs = snapshot.referenced ?? [];
  if (refs.length === 0) {
    return files;
  }
  const size = refs.reduce((total, ref) => total + ref.size, 0);
  const noun = refs.length === 1 ? 'directory' : 'directories';
  return `${files}; ${refs.length} ${noun} referenced (${formatBytes(size)}): ${refs
    .map(ref => ref.path)
    .join(', ')}`;
}
