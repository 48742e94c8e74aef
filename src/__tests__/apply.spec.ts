import { IAppliedFile, isJobFile, previewNode } from '../apply';

const preview: IAppliedFile = {
  format: 'manifest',
  language: 'yaml',
  filename: 'pod-finetuning.yaml',
  text: 'kind: PyTorchJob\n',
  diff: '--- a\n+++ b\n+  labels: {}\n',
  changes: [
    {
      path: 'metadata.labels.hyperpod.jupyter.org/user',
      action: 'added',
      value: 'alice',
      reason: 'tracked as your job (job id, owner)'
    }
  ],
  problems: [
    {
      path: 'spec.pytorchReplicaSpecs',
      message: 'line 8: 8 Workers, no Master and no elasticPolicy',
      fix: 'add spec.elasticPolicy'
    }
  ],
  fix_diff: '--- a\n+++ b\n+  elasticPolicy:\n',
  warnings: [],
  dry_run: true,
  job: null
};

describe('apply', () => {
  it('submits manifests and sbatch scripts as they are', () => {
    expect(isJobFile('pod-finetuning.yaml')).toBe(true);
    expect(isJobFile('x.YML')).toBe(true);
    expect(isJobFile('ranks.sbatch')).toBe(true);
    expect(isJobFile('job.slurm')).toBe(true);
    expect(isJobFile('train.py')).toBe(false);
  });

  it('marks each problem and change, and shows the fix diff', () => {
    const node = previewNode(preview);
    const items = Array.from(node.querySelectorAll('li')).map(
      li => li.textContent
    );
    expect(items).toEqual([
      '! spec.pytorchReplicaSpecs: line 8: 8 Workers, no Master and no elasticPolicy (fix: add spec.elasticPolicy)',
      '+ metadata.labels.hyperpod.jupyter.org/user added: alice (tracked as your job (job id, owner))'
    ]);
    expect(node.querySelector('pre')?.textContent).toContain(
      '+  elasticPolicy:'
    );
  });

  it('shows the plain diff when nothing needs fixing', () => {
    const node = previewNode({ ...preview, problems: [] });
    expect(node.querySelector('pre')?.textContent).toContain('+  labels: {}');
    expect(node.querySelectorAll('li[data-mark="!"]').length).toBe(0);
  });
});
