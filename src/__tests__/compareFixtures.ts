/**
 * Answers of `GET compare` and `GET jobs/{a}/diff/{b}` as the server types them (the generated
 * JobComparison / JobDiff): a learning-rate change between two QLoRA runs and an evaluate job.
 */
import {
  IComparedJob,
  IJobComparison,
  IJobDiff,
  IJobMetrics,
  IMetricPoint
} from '../models';
import { CompareClient } from '../components/compare/CompareView';
import { ApiError } from '../handler';

export function makeComparedJob(extra: Partial<IComparedJob>): IComparedJob {
  return {
    id: 'job-a',
    name: 'qlora-a',
    state: 'SUCCEEDED',
    created: 1_700_000_000,
    duration: 754,
    exit_code: 0,
    commit: '3f2a9c1d0e',
    dirty: false,
    values: {},
    final_metrics: {},
    evaluation: null,
    metrics_message: null,
    ...extra
  };
}

export function makeComparison(): IJobComparison {
  return {
    jobs: [
      makeComparedJob({
        values: { 'env.LR': '1e-4', 'train.yaml:lora.r': 8 },
        final_metrics: {
          loss: { step: 50, value: 0.8123, timestamp: 1 },
          eval_loss: { step: 50, value: 0.9, timestamp: 1 }
        }
      }),
      makeComparedJob({
        id: 'job-b',
        name: 'qlora-b',
        state: 'FAILED',
        duration: 65,
        exit_code: 1,
        dirty: true,
        values: { 'env.LR': '5e-4', 'train.yaml:lora.r': null },
        final_metrics: {
          loss: { step: 20, value: 1.5, timestamp: 2 },
          eval_rouge1_finetuned: { step: 0, value: 0.49, timestamp: 2 }
        },
        evaluation: {
          rouge: [
            { name: 'rouge1', base: 0.2, finetuned: 0.49, delta: 0.29 },
            { name: 'rougeL', base: 0.18, finetuned: 0.17, delta: -0.01 }
          ],
          samples: 32,
          max_new_tokens: 64,
          metric_names: ['eval_rouge1_finetuned']
        }
      })
    ],
    differing: ['env.LR', 'train.yaml:lora.r'],
    metrics: ['eval_loss', 'eval_rouge1_finetuned', 'loss'],
    notes: ['job-b: MLflow run not found']
  };
}

export const CODE_DIFF =
  '--- a/train.py\n+++ b/train.py\n@@ -1,2 +1,2 @@\n-lr = 1e-4\n+lr = 5e-4 # ' +
  'x'.repeat(400) +
  '\n';

export function makeDiff(): IJobDiff {
  return {
    a: 'job-a',
    b: 'job-b',
    spec: [{ field: 'env.LR', a: '1e-4', b: '5e-4' }],
    configs: [
      {
        name: 'train.yaml',
        status: 'changed',
        values: [{ field: 'lora.r', a: 8, b: null }],
        diff: '--- a/train.yaml\n+++ b/train.yaml\n-lora: {r: 8}\n+lora: {}\n'
      }
    ],
    code: {
      a: { commit: '3f2a9c1d0e', dirty: false, files: 3, bytes: 4096 },
      b: { commit: '3f2a9c1d0e', dirty: true, files: 4, bytes: 5000 },
      files: [
        {
          path: 'train.py',
          status: 'changed',
          a_sha256: 'aa',
          b_sha256: 'bb',
          a_size: 1024,
          b_size: 1100,
          diff: CODE_DIFF,
          note: null
        },
        {
          path: 'weights.bin',
          status: 'added',
          a_sha256: null,
          b_sha256: 'cc',
          a_size: null,
          b_size: 300_000,
          diff: null,
          note: 'over 256 KiB: compared by SHA-256 only'
        }
      ],
      unchanged: 2
    },
    environment: {
      a_sha256: 'p1',
      b_sha256: 'p2',
      same: false,
      packages: [
        { name: 'torch', status: 'changed', a: '2.3.0', b: '2.4.1' },
        { name: 'peft', status: 'added', a: null, b: '0.12.0' }
      ]
    },
    notes: ['job-a: no resolved config recorded for eval.yaml']
  };
}

/** MLflow points at these steps with these values. */
export function points(pairs: [number, number][]): IMetricPoint[] {
  return pairs.map(([step, value]) => ({ step, value, timestamp: step }));
}

/**
 * `GET jobs/{id}/metrics` of the compared jobs: job-a logs every step, job-b every other step
 * (and a system metric), job-c no run at all.
 */
export function makeJobMetrics(id: string): IJobMetrics {
  const run = {
    run_id: `run-${id}`,
    experiment_id: '1',
    status: 'FINISHED',
    url: null
  };
  if (id === 'job-a') {
    return {
      run,
      metrics: {
        learning_rate: points([
          [1, 1e-4],
          [2, 1e-4],
          [3, 1e-4]
        ]),
        eval_loss: points([
          [2, 1.9],
          [3, 1.7]
        ]),
        loss: points([
          [1, 2.0],
          [2, 1.5],
          [3, 1.2]
        ]),
        train_runtime: points([[3, 12.5]])
      },
      message: null,
      evaluation: null
    };
  }
  if (id === 'job-b') {
    return {
      run,
      metrics: {
        loss: points([
          [2, 2.1],
          [4, 1.0]
        ]),
        learning_rate: points([
          [2, 5e-4],
          [4, 5e-4]
        ]),
        'system/cpu_utilization_percentage': points([
          [2, 30],
          [4, 35]
        ])
      },
      message: null,
      evaluation: null
    };
  }
  return {
    run: null,
    metrics: {},
    message: 'No MLflow run is tagged with this job',
    evaluation: null
  };
}

/** A client answering the fixtures, recording what was asked. */
export function compareClient(failDiff = false, failMetrics: string[] = []) {
  const asked: string[] = [];
  const client: CompareClient = {
    compare: async (ids: string[]) => {
      asked.push(`compare ${ids.join(',')}`);
      return makeComparison();
    },
    diff: async (a: string, b: string) => {
      asked.push(`diff ${a} ${b}`);
      if (failDiff) {
        throw new ApiError('Job job-b not found', 404, 'NotFound');
      }
      return makeDiff();
    },
    metrics: async (id: string) => {
      asked.push(`metrics ${id}`);
      if (failMetrics.includes(id)) {
        throw new ApiError(
          'MLflow at http://mlflow:5000 does not answer: start it, or set HyperPodApp.mlflow_tracking_uri',
          503,
          'MlflowUnavailable'
        );
      }
      return makeJobMetrics(id);
    }
  };
  return { client, asked };
}

/** Three jobs: job-c ran no MLflow run. */
export function threeJobs() {
  const comparison = makeComparison();
  comparison.jobs.push(
    makeComparedJob({ id: 'job-c', name: 'qlora-c', state: 'FAILED' })
  );
  return comparison;
}
