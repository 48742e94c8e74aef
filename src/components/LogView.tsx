import {
  caretDownIcon,
  caretUpIcon,
  downloadIcon,
  runIcon
} from '@jupyterlab/ui-components';
import { FitAddon } from '@xterm/addon-fit';
import { SearchAddon } from '@xterm/addon-search';
import { Terminal } from '@xterm/xterm';
import * as React from 'react';

import { HyperpodClient } from '../api';
import { pauseIcon } from '../compat';
import { IStreamStatus, LogStream } from '../logstream';
import { endedMessage } from '../diagnosis';
import { IJob, isFinished, JobState } from '../models';
import { factsBehind, matchCount, rankLabel, rankOnChange } from '../ranks';
import { IconButton } from './common';
import { RankPrefixer } from '../rankprefix';
import {
  codeFontFamily,
  codeFontSize,
  saveText,
  searchDecorations,
  terminalTheme
} from './terminal';

export interface ILogViewProps {
  client: HyperpodClient;
  job: IJob;
  tailLines: number;
  canFollow: boolean;
  perRank: boolean;
  /** The rank shown first (a failed job opens on the rank that failed first). */
  initialRank?: number;
  /** Set by the owner to switch ranks ("Show its log"); applied when it changes. */
  rankRequest?: { rank: number; serial: number } | null;
  /** The stream saw the job's state change or end: the owner refreshes the job. */
  onJobState?: (state: JobState) => void;
  /** A rank the server last said had not started printed: the owner asks the server again. */
  onFactsBehind?: () => void;
}

/** The most lines the server returns at once (its tail limit). */
const DOWNLOAD_LINES = 100000;

function rankCount(job: IJob): number {
  if (job.ranks.length > 0) {
    return job.ranks.length;
  }
  return (job.spec.nodes ?? 1) * (job.spec.procs_per_node ?? 1);
}

export function LogView(props: ILogViewProps): JSX.Element {
  const { client, job } = props;
  const hostRef = React.useRef<HTMLDivElement>(null);
  const terminalRef = React.useRef<Terminal | null>(null);
  const searchRef = React.useRef<SearchAddon | null>(null);
  const streamRef = React.useRef<LogStream | null>(null);
  const [rank, setRank] = React.useState<number | 'all'>(
    props.initialRank ?? 0
  );
  React.useEffect(() => {
    if (props.rankRequest) {
      setRank(props.rankRequest.rank);
    }
  }, [props.rankRequest?.serial]);
  // The job failed while shown: every open view moves to the rank that failed.
  const shownJob = React.useRef<IJob | null>(null);
  React.useEffect(() => {
    const next = rankOnChange(shownJob.current, job);
    shownJob.current = job;
    if (next !== null) {
      setRank(next);
    }
  }, [job.state, job.failed_rank]);
  const [status, setStatus] = React.useState<IStreamStatus>({
    phase: 'connecting',
    message: 'Loading the log…'
  });
  const [query, setQuery] = React.useState('');
  const [found, setFound] = React.useState<{
    resultIndex: number;
    resultCount: number;
  } | null>(null);
  const finishedAtOpen = React.useRef(isFinished(job.state));
  const onJobState = React.useRef(props.onJobState);
  onJobState.current = props.onJobState;
  const jobRef = React.useRef(job);
  jobRef.current = job;
  const onFactsBehind = React.useRef(props.onFactsBehind);
  onFactsBehind.current = props.onFactsBehind;
  const ranks = rankCount(job);

  // The terminal lives as long as the view.
  React.useEffect(() => {
    const terminal = new Terminal({
      convertEol: true,
      disableStdin: true,
      cursorBlink: false,
      cursorStyle: 'bar',
      cursorInactiveStyle: 'none',
      scrollback: 20000,
      // The canvas renderer needs real values, not CSS variables.
      fontSize: codeFontSize(),
      fontFamily: codeFontFamily(),
      lineHeight: 1.15,
      theme: terminalTheme(),
      // The search addon's match decorations (its match count) use the decoration API.
      allowProposedApi: true
    });
    const fit = new FitAddon();
    const search = new SearchAddon();
    terminal.loadAddon(fit);
    terminal.loadAddon(search);
    terminal.open(hostRef.current!);
    terminalRef.current = terminal;
    searchRef.current = search;
    const results = search.onDidChangeResults(result => setFound(result));
    const refit = () => {
      const host = hostRef.current;
      if (host && host.clientWidth > 0 && host.clientHeight > 0) {
        try {
          fit.fit();
        } catch (error) {
          // Not laid out yet.
        }
      }
    };
    refit();
    const resize = new ResizeObserver(() => refit());
    resize.observe(hostRef.current!);
    const themeWatch = new MutationObserver(() => {
      terminal.options.theme = terminalTheme();
    });
    themeWatch.observe(document.body, {
      attributes: true,
      attributeFilter: ['data-jp-theme-light', 'data-jp-theme-name']
    });
    return () => {
      results.dispose();
      resize.disconnect();
      themeWatch.disconnect();
      terminal.dispose();
      terminalRef.current = null;
      searchRef.current = null;
    };
  }, []);

  // Load the tail, then follow live; again when the rank changes.
  React.useEffect(() => {
    const terminal = terminalRef.current;
    if (!terminal) {
      return;
    }
    let disposed = false;
    terminal.reset();
    const prefixer = new RankPrefixer(rank === 'all');
    const asked = new Set<number>();
    const write = (r: number, text: string) => {
      terminal.write(prefixer.format(r, text));
      if (text && !asked.has(r) && factsBehind(jobRef.current, r)) {
        asked.add(r);
        onFactsBehind.current?.();
      }
    };
    const start = async () => {
      const offsets = new Map<number, number>();
      const wanted =
        rank === 'all' ? Array.from({ length: ranks }, (_, i) => i) : [rank];
      const tail = Math.max(10, Math.floor(props.tailLines / wanted.length));
      setStatus({ phase: 'connecting', message: 'Loading the log…' });
      try {
        for (const r of wanted) {
          const snapshot = await client.logs(job.id, r, tail);
          if (disposed) {
            return;
          }
          if (snapshot.truncated) {
            terminal.write(
              `\x1b[2m… earlier lines of rank ${r} are not shown (Download gets up to ${DOWNLOAD_LINES.toLocaleString()} lines)\x1b[0m\r\n`
            );
          }
          write(r, snapshot.text);
          offsets.set(r, snapshot.offset);
        }
      } catch (error) {
        if (!disposed) {
          setStatus({
            phase: 'failed',
            message: error instanceof Error ? error.message : String(error)
          });
        }
        if (finishedAtOpen.current || !props.canFollow) {
          return;
        }
      }
      if (disposed) {
        return;
      }
      if (finishedAtOpen.current || !props.canFollow) {
        setStatus({
          phase: 'ended',
          message: props.canFollow
            ? endedMessage(job)
            : 'This cluster does not follow logs live: use refresh.'
        });
        return;
      }
      const stream = new LogStream({
        url: current => client.logStreamUrl(job.id, rank, current),
        offsets,
        onData: write,
        onState: state => onJobState.current?.(state),
        onEnd: state => onJobState.current?.(state),
        onStatus: next => {
          if (!disposed) {
            setStatus(next);
          }
        }
      });
      streamRef.current = stream;
      stream.start();
    };
    void start();
    return () => {
      disposed = true;
      streamRef.current?.dispose();
      streamRef.current = null;
    };
  }, [job.id, rank]);

  const stream = streamRef.current;
  const paused = status.phase === 'paused';
  const canToggle =
    stream !== null && status.phase !== 'ended' && status.phase !== 'failed';

  const find = (forward: boolean) => {
    const search = searchRef.current;
    if (!search || !query) {
      setFound(null);
      return;
    }
    const options = { caseSensitive: false, decorations: searchDecorations() };
    const hit = forward
      ? search.findNext(query, options)
      : search.findPrevious(query, options);
    if (!hit) {
      setFound({ resultIndex: -1, resultCount: 0 });
    }
  };

  const download = async () => {
    const wanted =
      rank === 'all' ? Array.from({ length: ranks }, (_, i) => i) : [rank];
    const parts: string[] = [];
    try {
      for (const r of wanted) {
        const snapshot = await client.logs(job.id, r, DOWNLOAD_LINES);
        if (snapshot.truncated) {
          parts.push(
            `[only the last ${DOWNLOAD_LINES.toLocaleString()} lines of rank ${r}: the log is longer]`
          );
        }
        parts.push(
          wanted.length > 1
            ? `===== rank ${r} =====\n${snapshot.text}`
            : snapshot.text
        );
      }
      saveText(
        parts.join('\n'),
        `${job.name}-${rank === 'all' ? 'all-ranks' : `rank${rank}`}.log`
      );
    } catch (error) {
      setStatus({
        phase: status.phase,
        message: `Download failed: ${error instanceof Error ? error.message : error}`
      });
    }
  };

  return (
    <div className="jp-hyperpod-LogView">
      <div className="jp-hyperpod-LogToolbar" role="toolbar" aria-label="Log">
        {props.perRank && ranks > 1 && (
          <select
            className="jp-mod-styled"
            aria-label="Rank"
            value={String(rank)}
            onChange={event =>
              setRank(
                event.target.value === 'all'
                  ? 'all'
                  : Number(event.target.value)
              )
            }
          >
            {Array.from({ length: ranks }, (_, i) => (
              <option key={i} value={i}>
                Rank {i}
                {job.ranks[i]?.node ? ` · ${job.ranks[i].node}` : ''}
                {rankLabel(job, i)}
              </option>
            ))}
            <option value="all">All ranks</option>
          </select>
        )}
        <IconButton
          icon={paused ? runIcon : pauseIcon()}
          title={paused ? 'Resume following' : 'Pause following'}
          label={paused ? 'Resume' : 'Pause'}
          disabled={!canToggle}
          onClick={() => (paused ? stream?.resume() : stream?.pause())}
        />
        <input
          className="jp-mod-styled jp-hyperpod-LogSearch"
          type="search"
          placeholder="Search the log"
          aria-label="Search the log"
          value={query}
          onChange={event => {
            setQuery(event.target.value);
            setFound(null);
            searchRef.current?.clearDecorations();
          }}
          onKeyDown={event => {
            if (event.key === 'Enter') {
              event.preventDefault();
              find(!event.shiftKey);
            }
          }}
        />
        <IconButton
          icon={caretUpIcon}
          title="Previous match"
          onClick={() => find(false)}
        />
        <IconButton
          icon={caretDownIcon}
          title="Next match"
          onClick={() => find(true)}
        />
        {found !== null && (
          <span
            className={
              found.resultCount > 0
                ? 'jp-hyperpod-LogSearch-count'
                : 'jp-hyperpod-LogSearch-none'
            }
            aria-live="polite"
          >
            {matchCount(found)}
          </span>
        )}
        <span className="jp-hyperpod-Spacer" />
        <IconButton
          icon={downloadIcon}
          title="Download the log"
          onClick={() => void download()}
        />
      </div>
      <div
        className={`jp-hyperpod-LogStatus jp-mod-${status.phase}`}
        role="status"
        aria-live="polite"
      >
        <span className="jp-hyperpod-LogStatus-dot" />
        {status.message}
        {status.phase === 'reconnecting' && (
          <button
            className="jp-Button jp-mod-minimal jp-hyperpod-Message-retry"
            onClick={() => stream?.retryNow()}
          >
            Retry now
          </button>
        )}
      </div>
      <div className="jp-hyperpod-Terminal" ref={hostRef} />
    </div>
  );
}
