import { LabIcon, refreshIcon } from '@jupyterlab/ui-components';
import * as React from 'react';

import { formatDuration, formatProgress } from '../format';
import { ApiError } from '../handler';
import { Health, IJobProgress, JobState } from '../models';

/** A small coloured label for a job or node state. */
export function StateBadge(props: {
  state: JobState | string;
  title?: string;
}): JSX.Element {
  const kind = String(props.state)
    .toLowerCase()
    .replace(/[^a-z]+/g, '-');
  return (
    <span
      className={`jp-hyperpod-Badge jp-hyperpod-state-${kind}`}
      title={props.title}
    >
      {props.state}
    </span>
  );
}

export function HealthBadge(props: {
  health: Health;
  detail?: string | null;
}): JSX.Element {
  return (
    <span
      className={`jp-hyperpod-Badge jp-hyperpod-health-${props.health}`}
      title={props.detail || `Health: ${props.health}`}
    >
      {props.health}
    </span>
  );
}

/** GPUs allocated out of total, as a bar and numbers. */
export function GpuBar(props: {
  allocated: number;
  total: number;
  label?: string;
}): JSX.Element {
  const { allocated, total } = props;
  if (total <= 0) {
    return <span className="jp-hyperpod-GpuBar-none">no GPU</span>;
  }
  const ratio = Math.min(1, Math.max(0, allocated / total));
  const text = `${allocated}/${total}`;
  return (
    <span
      className="jp-hyperpod-GpuBar"
      role="meter"
      aria-valuemin={0}
      aria-valuemax={total}
      aria-valuenow={allocated}
      aria-label={props.label ?? `GPUs allocated: ${text}`}
      title={`${allocated} of ${total} GPUs allocated`}
    >
      <span className="jp-hyperpod-GpuBar-track">
        <span
          className="jp-hyperpod-GpuBar-fill"
          style={{ width: `${ratio * 100}%` }}
        />
      </span>
      <span className="jp-hyperpod-GpuBar-text">{text}</span>
    </span>
  );
}

/** A message for an error, next to what it concerns; with a retry when it may help. */
export function ErrorMessage(props: {
  error: ApiError | string | null;
  onRetry?: () => void;
  stale?: boolean;
}): JSX.Element | null {
  const { error } = props;
  if (!error) {
    return null;
  }
  const message = typeof error === 'string' ? error : error.message;
  const warning = typeof error !== 'string' && error.unreachable;
  return (
    <div
      className={`jp-hyperpod-Message ${warning ? 'jp-mod-warning' : 'jp-mod-error'}`}
      role="alert"
    >
      <span className="jp-hyperpod-Message-text">
        {message}
        {props.stale ? ' Showing the last data received.' : ''}
      </span>
      {props.onRetry && (
        <button
          className="jp-Button jp-mod-minimal jp-hyperpod-Message-retry"
          onClick={props.onRetry}
        >
          Retry now
        </button>
      )}
    </div>
  );
}

/** A small icon button with a tooltip, reachable with the keyboard. */
export function IconButton(props: {
  icon: LabIcon;
  title: string;
  onClick: () => void;
  disabled?: boolean;
  label?: string;
  className?: string;
}): JSX.Element {
  return (
    <button
      type="button"
      className={`jp-Button jp-mod-minimal jp-hyperpod-IconButton ${props.className ?? ''}`}
      title={props.title}
      aria-label={props.title}
      disabled={props.disabled}
      onClick={props.onClick}
    >
      <props.icon.react tag="span" elementSize="normal" />
      {props.label && (
        <span className="jp-hyperpod-IconButton-label">{props.label}</span>
      )}
    </button>
  );
}

export function RefreshButton(props: {
  onClick: () => void;
  title?: string;
}): JSX.Element {
  return (
    <IconButton
      icon={refreshIcon}
      title={props.title ?? 'Refresh'}
      onClick={props.onClick}
    />
  );
}

/** A running job's progress: a thin bar and "step 12/50 · 24% · ETA 3m · loss 0.81". */
export function JobProgress(props: {
  progress: IJobProgress | null | undefined;
}): JSX.Element | null {
  const { progress } = props;
  if (!progress) {
    return null;
  }
  const text = formatProgress(progress);
  return (
    <span
      className="jp-hyperpod-Progress"
      role="progressbar"
      aria-valuemin={0}
      aria-valuemax={progress.total}
      aria-valuenow={progress.step}
      aria-valuetext={text}
      title={`${text}${progress.elapsed_seconds !== null ? ` · running for ${formatDuration(progress.elapsed_seconds)}` : ''}`}
    >
      <span className="jp-hyperpod-Progress-track">
        <span
          className="jp-hyperpod-Progress-fill"
          style={{ width: `${Math.round(progress.fraction * 100)}%` }}
        />
      </span>
      <span className="jp-hyperpod-Progress-text">{text}</span>
    </span>
  );
}

/** Placeholder of a known height while data loads: nothing jumps when it arrives. */
export function Loading(props: { what: string }): JSX.Element {
  return (
    <div className="jp-hyperpod-Loading" aria-busy="true">
      Loading {props.what}…
    </div>
  );
}

/** Re-render every `ms` (relative ages stay right without a poll). */
export function useTick(ms: number): number {
  const [tick, setTick] = React.useState(0);
  React.useEffect(() => {
    const id = setInterval(() => setTick(t => t + 1), ms);
    return () => clearInterval(id);
  }, [ms]);
  return tick;
}

/** Re-render when a Lumino signal fires. */
export function useSignal(signal: {
  connect: (fn: () => void) => boolean;
  disconnect: (fn: () => void) => boolean;
}): void {
  const [, setCount] = React.useState(0);
  React.useEffect(() => {
    const update = () => setCount(c => c + 1);
    signal.connect(update);
    return () => {
      signal.disconnect(update);
    };
  }, [signal]);
}
