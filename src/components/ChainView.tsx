/**
 * A job's chain in its view (#24 item 4): what it waits for, every link of its chain (jobs
 * linked by `after`) with its state and why, and "Resume" on the link that failed first.
 */
import * as React from 'react';

import { HyperpodClient } from '../api';
import { afterLine, canResume, waitingLine } from '../chains';
import { ApiError } from '../handler';
import { asApiError } from '../model';
import { IJob, IJobChain } from '../models';
import { ErrorMessage, StateBadge } from './common';

/** What the chain view asks of the server (the HyperpodClient's). */
export type ChainClient = Pick<HyperpodClient, 'chain' | 'resume'>;

export interface IChainViewProps {
  client: ChainClient;
  job: IJob;
  /** Open a job of the chain. */
  onOpen?: (id: string) => void;
  /** A resume started these jobs. */
  onResumed?: (jobs: IJob[]) => void;
}

export function ChainView(props: IChainViewProps): JSX.Element | null {
  const { client, job } = props;
  const [chain, setChain] = React.useState<IJobChain | null>(null);
  const [error, setError] = React.useState<ApiError | null>(null);
  const [resuming, setResuming] = React.useState(false);

  React.useEffect(() => {
    let cancelled = false;
    client
      .chain(job.id)
      .then(found => {
        if (!cancelled) {
          setChain(found);
          setError(null);
        }
      })
      .catch(reason => {
        if (!cancelled) {
          setError(asApiError(reason));
        }
      });
    return () => {
      cancelled = true;
    };
  }, [job.id, job.state, job.held]);

  const resume = async (withChanges: boolean) => {
    setResuming(true);
    try {
      const started = await client.resume(job.id, withChanges);
      setError(null);
      props.onResumed?.(started.jobs);
    } catch (reason) {
      setError(asApiError(reason));
    } finally {
      setResuming(false);
    }
  };

  const waiting = waitingLine(job);
  const links = chain?.links ?? [];
  if (!waiting && links.length < 2 && !error) {
    return null;
  }
  return (
    <section className="jp-hyperpod-Chain" aria-label="Chain">
      {waiting && (
        <div className="jp-hyperpod-Chain-waiting" role="status">
          {waiting}
        </div>
      )}
      <ErrorMessage error={error} />
      {links.length > 1 && (
        <>
          <h3>Chain ({links.length} links)</h3>
          <table className="jp-hyperpod-Table jp-hyperpod-Chain-links">
            <thead>
              <tr>
                <th>Job</th>
                <th>State</th>
                <th>Waits for</th>
                <th>Why</th>
              </tr>
            </thead>
            <tbody>
              {links.map(link => (
                <tr
                  key={link.id}
                  className={link.id === job.id ? 'jp-mod-current' : ''}
                  aria-current={link.id === job.id ? 'true' : undefined}
                >
                  <td>
                    {props.onOpen && link.id !== job.id ? (
                      <button
                        className="jp-hyperpod-Link"
                        onClick={() => props.onOpen?.(link.id)}
                        title={`Open ${link.id}`}
                      >
                        {link.name}
                      </button>
                    ) : (
                      link.name
                    )}{' '}
                    <code>{link.id}</code>
                  </td>
                  <td>
                    <StateBadge state={link.state} />
                  </td>
                  <td>{afterLine(link.after, link.after_any)}</td>
                  <td>{link.held ?? link.state_reason ?? ''}</td>
                </tr>
              ))}
            </tbody>
          </table>
          {chain && canResume(chain, job) && (
            <div className="jp-hyperpod-Chain-resume">
              <button
                className="jp-Button jp-mod-styled"
                disabled={resuming}
                title="A new run of this link (its snapshot) and of every link that waited on it"
                onClick={() => void resume(false)}
              >
                Resume from here
              </button>{' '}
              <button
                className="jp-Button jp-mod-styled"
                disabled={resuming}
                title="The same, with your workdir's files as they are now (your fix)"
                onClick={() => void resume(true)}
              >
                Resume with my changes
              </button>
            </div>
          )}
        </>
      )}
    </section>
  );
}
