import * as React from 'react';

import { ApiError } from '../handler';
import { asApiError, HyperpodModel } from '../model';
import { IAwsCluster, IAwsClusterList } from '../models';
import { ErrorMessage, Loading } from './common';

/**
 * "Connect to a HyperPod cluster": lists the clusters of the server's AWS region and switches
 * the server to an EKS one. A Slurm cluster's row offers to make the server's machine its login
 * node (`POST aws/connect` with `slurm: true`: slurm.conf, the munge key over SSM, munged).
 */
export function AwsConnect(props: { model: HyperpodModel }): JSX.Element {
  const { model } = props;
  const [open, setOpen] = React.useState(false);
  const [list, setList] = React.useState<IAwsClusterList | null>(null);
  const [loading, setLoading] = React.useState(false);
  const [connecting, setConnecting] = React.useState<string | null>(null);
  const [error, setError] = React.useState<ApiError | null>(null);
  // The region to list: empty asks the server's (AWS_REGION, its config); asked for when unknown.
  const [region, setRegion] = React.useState('');
  const mounted = React.useRef(true);
  React.useEffect(
    () => () => {
      mounted.current = false;
    },
    []
  );

  const load = async (asked: string = region): Promise<void> => {
    setLoading(true);
    setError(null);
    try {
      const reply = await model.client.awsClusters(asked.trim() || undefined);
      if (mounted.current) {
        setList(reply);
        setRegion(reply.region);
      }
    } catch (e) {
      if (mounted.current) {
        setError(asApiError(e));
      }
    } finally {
      if (mounted.current) {
        setLoading(false);
      }
    }
  };

  const toggle = (): void => {
    const next = !open;
    setOpen(next);
    if (next) {
      void load();
    }
  };

  const connect = async (
    cluster: IAwsCluster,
    slurm = false
  ): Promise<void> => {
    setConnecting(cluster.name);
    setError(null);
    try {
      const info = await model.client.awsConnect({
        cluster: cluster.arn ?? cluster.name,
        region: list?.region || region.trim() || undefined,
        ...(slurm ? { slurm: true } : {})
      });
      if (mounted.current) {
        setOpen(false);
      }
      await model.useCluster(info);
    } catch (e) {
      if (mounted.current) {
        setError(asApiError(e));
      }
    } finally {
      if (mounted.current) {
        setConnecting(null);
      }
    }
  };

  return (
    <div className="jp-hyperpod-AwsConnect">
      <button
        className="jp-Button jp-mod-styled jp-mod-accept jp-hyperpod-AwsConnect-toggle"
        aria-expanded={open}
        disabled={connecting !== null}
        onClick={toggle}
      >
        Connect to a HyperPod cluster
      </button>
      {connecting && (
        <span className="jp-hyperpod-AwsConnect-progress" role="status">
          Connecting to {connecting}…
        </span>
      )}
      {open && (
        <form
          className="jp-hyperpod-AwsConnect-region"
          onSubmit={event => {
            event.preventDefault();
            void load();
          }}
        >
          <label htmlFor="jp-hyperpod-aws-region">AWS region</label>
          <input
            id="jp-hyperpod-aws-region"
            className="jp-mod-styled jp-hyperpod-AwsConnect-regionInput"
            type="text"
            value={region}
            placeholder="e.g. us-west-2"
            spellCheck={false}
            aria-invalid={error?.field === 'region'}
            onChange={event => setRegion(event.target.value)}
          />
          <button
            type="submit"
            className="jp-Button jp-mod-styled jp-mod-reject"
            disabled={loading}
          >
            List clusters
          </button>
        </form>
      )}
      <ErrorMessage
        error={
          error?.field === 'region'
            ? 'The server does not know which AWS region to look in: enter one above.'
            : error
        }
        onRetry={
          open && !list && error?.field !== 'region'
            ? () => void load()
            : undefined
        }
      />
      {open &&
        (loading ? (
          <Loading what="HyperPod clusters" />
        ) : list ? (
          list.clusters.length === 0 ? (
            <div className="jp-hyperpod-Empty">
              No HyperPod cluster in {list.region}.
            </div>
          ) : (
            <ul
              className="jp-hyperpod-AwsConnect-list"
              aria-label={`HyperPod clusters in ${list.region}`}
            >
              {list.clusters.map(cluster => (
                <li
                  key={cluster.arn ?? cluster.name}
                  data-cluster={cluster.name}
                >
                  <span className="jp-hyperpod-AwsConnect-name">
                    {cluster.name}
                  </span>
                  <span className="jp-hyperpod-AwsConnect-meta">
                    {[cluster.orchestrator ?? 'unknown', cluster.status]
                      .filter(Boolean)
                      .join(' · ')}
                  </span>
                  <button
                    className="jp-Button jp-mod-styled jp-mod-accept"
                    disabled={!cluster.connectable || connecting !== null}
                    title={cluster.reason ?? `Connect to ${cluster.name}`}
                    aria-label={`Connect to ${cluster.name}`}
                    onClick={() => void connect(cluster)}
                  >
                    Connect
                  </button>
                  {cluster.orchestrator === 'slurm' && (
                    <button
                      className="jp-Button jp-mod-styled jp-mod-accept"
                      disabled={
                        connecting !== null ||
                        !['InService', 'Updating'].includes(
                          cluster.status ?? ''
                        )
                      }
                      title="Make the server's machine a login node of this cluster: slurm.conf, the munge key over SSM, munged, then switch to Slurm"
                      aria-label={`Set up a login node of ${cluster.name}`}
                      onClick={() => void connect(cluster, true)}
                    >
                      Set up login node
                    </button>
                  )}
                  {cluster.reason && (
                    <span className="jp-hyperpod-AwsConnect-reason">
                      {cluster.reason}
                    </span>
                  )}
                </li>
              ))}
            </ul>
          )
        ) : null)}
    </div>
  );
}
