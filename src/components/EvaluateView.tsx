/**
 * An evaluate job's own view (in its Metrics tab): every ROUGE variant of the fine-tuned model
 * beside the base model's, with the delta, as the server types them (`JobMetrics.evaluation`);
 * while the job generates, how far it is (the server's `Job.progress`, parsed from the
 * evaluation's progress bar).
 */
import * as React from 'react';

import { formatDuration } from '../format';
import { IEvaluationMetrics, IJob, IJobMetrics, IJobProgress } from '../models';

/** The seed's evaluate template: its jobs get this view before any score is logged. */
export function isEvaluateJob(
  job: IJob | null | undefined,
  metrics: IJobMetrics | null
): boolean {
  return !!metrics?.evaluation || job?.spec.template === 'evaluate';
}

/** A score as the seed prints it: four decimals. */
export function score(value: number | null): string {
  return value === null ? '–' : value.toFixed(4);
}

/** The delta with its sign ("+0.2900", "−0.0100"; "–" without a base). */
export function delta(value: number | null): string {
  if (value === null) {
    return '–';
  }
  const sign = value > 0 ? '+' : value < 0 ? '−' : '±';
  return `${sign}${Math.abs(value).toFixed(4)}`;
}

/** "Generating 12/32 examples · 37% · ETA 36s" (the examples of every model's pass). */
export function generationLine(progress: IJobProgress): string {
  const parts = [
    `Generating ${progress.step}/${progress.total} examples`,
    `${Math.floor(progress.fraction * 100)}%`
  ];
  if (progress.eta_seconds !== null && progress.fraction < 1) {
    parts.push(`ETA ${formatDuration(progress.eta_seconds)}`);
  }
  return parts.join(' · ');
}

/**
 * Every ROUGE variant of an evaluation: base, fine-tuned and the delta (the evaluate job's view,
 * and each evaluate job's cell in the comparison).
 */
export function RougeTable(props: {
  evaluation: IEvaluationMetrics;
}): JSX.Element {
  const { evaluation } = props;
  const facts = [
    evaluation.samples !== null ? `${evaluation.samples} test examples` : null,
    evaluation.max_new_tokens !== null
      ? `up to ${evaluation.max_new_tokens} new tokens`
      : null
  ].filter(Boolean);
  return (
    <>
      <table
        className="jp-hyperpod-Table jp-hyperpod-RougeTable"
        aria-label="ROUGE: fine-tuned vs base"
      >
        <thead>
          <tr>
            <th scope="col">ROUGE</th>
            <th scope="col">Base</th>
            <th scope="col">Fine-tuned</th>
            <th scope="col" title="Fine-tuned minus base">
              Δ
            </th>
          </tr>
        </thead>
        <tbody>
          {evaluation.rouge.map(row => (
            <tr key={row.name} data-rouge={row.name}>
              <th scope="row">{row.name}</th>
              <td>{score(row.base)}</td>
              <td>{score(row.finetuned)}</td>
              <td
                className={
                  row.delta === null
                    ? ''
                    : row.delta > 0
                      ? 'jp-hyperpod-Delta jp-mod-up'
                      : row.delta < 0
                        ? 'jp-hyperpod-Delta jp-mod-down'
                        : 'jp-hyperpod-Delta'
                }
              >
                {delta(row.delta)}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      {facts.length > 0 && (
        <div className="jp-hyperpod-Muted">Mean F1 on {facts.join(', ')}.</div>
      )}
    </>
  );
}

export function EvaluateView(props: {
  job: IJob | null | undefined;
  metrics: IJobMetrics | null;
}): JSX.Element {
  const { job, metrics } = props;
  const evaluation = metrics?.evaluation ?? null;
  const running = job?.state === 'RUNNING' || job?.state === 'PENDING';
  let status: string | null = null;
  if (running && !evaluation) {
    status = job?.progress
      ? generationLine(job.progress)
      : job?.state === 'PENDING'
        ? 'Waiting to start.'
        : 'Loading the fine-tuned and base models…';
  }
  return (
    <section className="jp-hyperpod-EvaluateView" aria-label="Evaluation">
      <h3 className="jp-hyperpod-MetricsGroup">
        Evaluation: fine-tuned vs base
      </h3>
      {status !== null && (
        <div
          className="jp-hyperpod-EvaluateStatus"
          role="status"
          aria-live="polite"
        >
          {status}
        </div>
      )}
      {evaluation ? (
        <RougeTable evaluation={evaluation} />
      ) : (
        !running && (
          <div className="jp-hyperpod-Empty">
            {metrics?.message ?? 'This evaluation logged no ROUGE score.'}
          </div>
        )
      )}
    </section>
  );
}
