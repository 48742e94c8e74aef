import * as React from 'react';

import { formatMemory } from '../format';
import { gpuApiFor, gpuByNode, IGpuNode } from '../gpu';
import { HyperpodModel } from '../model';
import { INode } from '../models';
import {
  EMPTY_FILTER,
  filterNodes,
  INodeFilter,
  summarizeNodes
} from '../nodes';
import {
  ErrorMessage,
  GpuBar,
  HealthBadge,
  Loading,
  RefreshButton,
  StateBadge,
  useSignal
} from './common';
import { AwsConnect } from './AwsConnect';
import { ClusterGpuSummary, NodeGpuBars, useGpuNodes } from './GpuBars';
import { VirtualList } from './VirtualList';

const ROW_HEIGHT = 48;

function NodeRow(props: { node: INode; gpu?: IGpuNode }): JSX.Element {
  const { node } = props;
  const details = [
    node.instance_type,
    node.instance_group && node.instance_group !== node.instance_type
      ? node.instance_group
      : null,
    node.cpus ? `${node.cpus} CPU` : null,
    node.memory_mb ? formatMemory(node.memory_mb) : null,
    node.efa ? `${node.efa} EFA` : null
  ]
    .filter(Boolean)
    .join(' · ');
  return (
    <div
      className="jp-hyperpod-NodeRow"
      data-node={node.name}
      title={node.health_detail ?? undefined}
    >
      <div className="jp-hyperpod-NodeRow-main">
        <span className="jp-hyperpod-NodeRow-name">{node.name}</span>
        <StateBadge state={node.state} />
        <HealthBadge health={node.health} detail={node.health_detail} />
      </div>
      <div className="jp-hyperpod-NodeRow-sub">
        <span className="jp-hyperpod-NodeRow-details">{details || '—'}</span>
        <GpuBar
          allocated={node.gpus.allocated}
          total={node.gpus.total}
          label={`GPUs allocated on ${node.name}`}
        />
        <NodeGpuBars node={props.gpu} />
      </div>
    </div>
  );
}

export function ClusterView(props: { model: HyperpodModel }): JSX.Element {
  const { model } = props;
  useSignal(model.clusterChanged);
  useSignal(model.viewChanged);
  const [filter, setFilter] = React.useState<INodeFilter>(EMPTY_FILTER);
  const nodes = model.nodes;
  const summary = React.useMemo(() => summarizeNodes(nodes ?? []), [nodes]);
  const shown = React.useMemo(
    () => filterNodes(nodes ?? [], filter),
    [nodes, filter]
  );
  const cluster = model.cluster;
  const gpuFigures = useGpuNodes(
    React.useMemo(() => gpuApiFor(model.client), [model.client]),
    model.settings.refreshInterval,
    () => model.isVisible()
  );
  const gpus = React.useMemo(() => gpuByNode(gpuFigures), [gpuFigures]);

  return (
    <div className="jp-hyperpod-View jp-hyperpod-ClusterView">
      <div className="jp-hyperpod-Summary" aria-label="Cluster summary">
        <dl className="jp-hyperpod-Facts">
          <dt>Orchestrator</dt>
          <dd>{cluster ? cluster.orchestrator : '—'}</dd>
          <dt>Cluster</dt>
          <dd title={cluster?.name}>{cluster ? cluster.name : '—'}</dd>
          <dt>User</dt>
          <dd>{cluster ? cluster.user : '—'}</dd>
          <dt>Partition</dt>
          <dd
            className="jp-hyperpod-Path"
            title={cluster?.filesystem.partition}
          >
            <bdi>
              {cluster
                ? `${cluster.filesystem.partition} (${cluster.filesystem.partition_mode})`
                : '—'}
            </bdi>
          </dd>
        </dl>
        <div className="jp-hyperpod-Totals">
          <span>
            <b>{summary.nodes}</b> node{summary.nodes === 1 ? '' : 's'}
          </span>
          <span>
            <b>{summary.healthy}</b> healthy
          </span>
          {summary.unhealthy > 0 && (
            <span className="jp-hyperpod-Totals-bad">
              <b>{summary.unhealthy}</b> unhealthy
            </span>
          )}
          <GpuBar
            allocated={summary.gpusAllocated}
            total={summary.gpusTotal}
            label="GPUs allocated in the cluster"
          />
        </div>
        <ClusterGpuSummary figures={gpuFigures} />
      </div>
      {cluster?.capabilities.aws_connect && <AwsConnect model={model} />}
      <ErrorMessage
        error={model.nodesError}
        stale={nodes !== null}
        onRetry={() => void model.refresh()}
      />
      <div className="jp-hyperpod-Filters">
        <input
          className="jp-mod-styled jp-hyperpod-Filter-text"
          type="search"
          placeholder="Filter nodes by name or type"
          aria-label="Filter nodes by name or type"
          value={filter.text}
          onChange={event => setFilter({ ...filter, text: event.target.value })}
        />
        <select
          className="jp-mod-styled"
          aria-label="Filter nodes by state"
          value={filter.state}
          onChange={event =>
            setFilter({ ...filter, state: event.target.value })
          }
        >
          <option value="">All states</option>
          {summary.states.map(state => (
            <option key={state} value={state}>
              {state}
            </option>
          ))}
        </select>
        <select
          className="jp-mod-styled"
          aria-label="Filter nodes by health"
          value={filter.health}
          onChange={event =>
            setFilter({ ...filter, health: event.target.value })
          }
        >
          <option value="">Any health</option>
          <option value="healthy">healthy</option>
          <option value="degraded">degraded</option>
          <option value="unhealthy">unhealthy</option>
          <option value="unknown">unknown</option>
        </select>
        <RefreshButton
          title="Refresh nodes"
          onClick={() => void model.refresh()}
        />
      </div>
      <div className="jp-hyperpod-ListCaption">
        {nodes === null
          ? ''
          : shown.length === nodes.length
            ? `${nodes.length} node${nodes.length === 1 ? '' : 's'}`
            : `${shown.length} of ${nodes.length} nodes`}
        {model.nodesUpdated && (
          <span className="jp-hyperpod-Updated">
            {' '}
            · updated {model.nodesUpdated.toLocaleTimeString()}
          </span>
        )}
      </div>
      {nodes === null ? (
        model.nodesError ? null : (
          <Loading what="nodes" />
        )
      ) : shown.length === 0 ? (
        <div className="jp-hyperpod-Empty">No node matches the filter.</div>
      ) : (
        <VirtualList
          items={shown}
          rowHeight={ROW_HEIGHT}
          itemKey={node => node.name}
          ariaLabel="Cluster nodes"
          renderRow={node => <NodeRow node={node} gpu={gpus.get(node.name)} />}
        />
      )}
    </div>
  );
}
