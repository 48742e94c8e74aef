import { ReactWidget } from '@jupyterlab/ui-components';
import { Message } from '@lumino/messaging';
import * as React from 'react';

import { HyperpodModel } from '../model';
import { IJob } from '../models';
import { ViewName } from '../settings';
import { ClusterView } from './ClusterView';
import { ErrorMessage, useSignal } from './common';
import { FilesView } from './FilesView';
import { JobsView } from './JobsView';
import { QueueView } from './QueueView';
import { SubmitView } from './SubmitView';
import { ViewBoundary } from './ViewBoundary';

export interface IPanelActions {
  openFile?: (path: string) => void;
  submitFile: (path: string) => void;
  openJob: (job: IJob) => void;
  cancelJob: (job: IJob) => void;
  resubmitJob: (job: IJob) => void;
  cancelJobs?: (jobs: IJob[]) => void;
  removeJobs?: (jobs: IJob[]) => void;
  compareJobs?: (jobs: IJob[]) => void;
  onSubmitted: (job: IJob) => void;
  /** Open the Submit form in the main area (or show it there when it is). */
  submitInMain?: () => void;
}

const TABS: { id: ViewName; title: string }[] = [
  { id: 'cluster', title: 'Cluster' },
  { id: 'files', title: 'Files' },
  { id: 'jobs', title: 'Jobs' },
  { id: 'queue', title: 'Queue' },
  { id: 'submit', title: 'Submit' }
];

function PanelBody(props: {
  model: HyperpodModel;
  actions: () => IPanelActions;
}): JSX.Element {
  const { model } = props;
  useSignal(model.viewChanged);
  useSignal(model.clusterChanged);
  useSignal(model.jobsChanged);
  const actions = props.actions();
  const view = model.view;
  const cluster = model.cluster;
  const tabRefs = React.useRef<Record<string, HTMLButtonElement | null>>({});

  const onKeyDown = (event: React.KeyboardEvent) => {
    const index = TABS.findIndex(t => t.id === view);
    let next = -1;
    if (event.key === 'ArrowRight') {
      next = (index + 1) % TABS.length;
    } else if (event.key === 'ArrowLeft') {
      next = (index + TABS.length - 1) % TABS.length;
    } else if (event.key === 'Home') {
      next = 0;
    } else if (event.key === 'End') {
      next = TABS.length - 1;
    }
    if (next >= 0) {
      event.preventDefault();
      model.view = TABS[next].id;
      tabRefs.current[TABS[next].id]?.focus();
    }
  };

  // Files and Submit keep their state when the user switches tabs: render once visited.
  const [visited, setVisited] = React.useState<Set<ViewName>>(new Set([view]));
  React.useEffect(() => {
    if (!visited.has(view)) {
      setVisited(new Set([...visited, view]));
    }
  }, [view]);

  return (
    <div className="jp-hyperpod-PanelBody">
      <header className="jp-hyperpod-PanelHeader">
        <span className="jp-hyperpod-PanelHeader-title">HyperPod</span>
        <span
          className="jp-hyperpod-PanelHeader-cluster"
          title={
            cluster
              ? `${cluster.orchestrator} cluster ${cluster.name}`
              : undefined
          }
        >
          {cluster ? `${cluster.name} · ${cluster.orchestrator}` : ''}
        </span>
      </header>
      <ErrorMessage
        error={model.clusterError}
        stale={cluster !== null}
        onRetry={() => void model.refresh()}
      />
      <div
        className="jp-hyperpod-Tabs"
        role="tablist"
        aria-label="HyperPod views"
        onKeyDown={onKeyDown}
      >
        {TABS.map(tab => (
          <button
            key={tab.id}
            ref={element => {
              tabRefs.current[tab.id] = element;
            }}
            id={`jp-hyperpod-tab-${tab.id}`}
            role="tab"
            aria-selected={view === tab.id}
            aria-controls={`jp-hyperpod-view-${tab.id}`}
            tabIndex={view === tab.id ? 0 : -1}
            className={`jp-hyperpod-Tab ${view === tab.id ? 'jp-mod-active' : ''}`}
            onClick={() => {
              model.view = tab.id;
            }}
          >
            {tab.title}
            {tab.id === 'jobs' && model.jobs
              ? (() => {
                  const active = model.jobs.filter(
                    j => j.state === 'RUNNING' || j.state === 'PENDING'
                  ).length;
                  return active > 0 ? (
                    <span
                      className="jp-hyperpod-Tab-count"
                      title={`${active} active`}
                    >
                      {active}
                    </span>
                  ) : null;
                })()
              : null}
          </button>
        ))}
      </div>
      {TABS.map(tab => (
        <div
          key={tab.id}
          id={`jp-hyperpod-view-${tab.id}`}
          role="tabpanel"
          aria-labelledby={`jp-hyperpod-tab-${tab.id}`}
          className="jp-hyperpod-TabPanel"
          hidden={view !== tab.id}
        >
          {(visited.has(tab.id) || view === tab.id) && (
            <ViewBoundary view={tab.title}>
              {tab.id === 'cluster' ? (
                <ClusterView model={model} />
              ) : tab.id === 'files' ? (
                <FilesView
                  model={model}
                  openFile={
                    cluster?.filesystem.contents_path !== null
                      ? actions.openFile
                      : undefined
                  }
                  submitFile={actions.submitFile}
                />
              ) : tab.id === 'jobs' ? (
                <JobsView
                  model={model}
                  openJob={actions.openJob}
                  cancelJob={actions.cancelJob}
                  resubmitJob={actions.resubmitJob}
                  cancelJobs={actions.cancelJobs}
                  removeJobs={actions.removeJobs}
                  compareJobs={actions.compareJobs}
                />
              ) : tab.id === 'queue' ? (
                <QueueView
                  client={model.client}
                  openJob={actions.openJob}
                  cancelJob={actions.cancelJob}
                  refreshSeconds={model.settings.refreshInterval}
                  active={view === 'queue'}
                />
              ) : model.submitInMain ? (
                <div className="jp-hyperpod-View">
                  <div className="jp-hyperpod-Empty">
                    The Submit form is open in the main area.
                    <button
                      type="button"
                      className="jp-Button jp-mod-styled jp-mod-accept"
                      onClick={() => actions.submitInMain?.()}
                    >
                      Show it
                    </button>
                  </div>
                </div>
              ) : (
                <SubmitView
                  model={model}
                  onSubmitted={actions.onSubmitted}
                  onExpand={actions.submitInMain}
                />
              )}
            </ViewBoundary>
          )}
        </div>
      ))}
    </div>
  );
}

/**
 * The left-sidebar panel. Its polls stand by while it is hidden and refresh when it shows.
 */
export class HyperpodPanel extends ReactWidget {
  constructor(
    readonly model: HyperpodModel,
    private _actions: () => IPanelActions
  ) {
    super();
    this.addClass('jp-hyperpod-Panel');
    model.isVisible = () => this.isVisible;
  }

  protected onAfterShow(msg: Message): void {
    super.onAfterShow(msg);
    this.model.start();
    void this.model.refresh();
  }

  protected onAfterAttach(msg: Message): void {
    super.onAfterAttach(msg);
    if (this.isVisible) {
      this.model.start();
    }
  }

  render(): JSX.Element {
    return <PanelBody model={this.model} actions={this._actions} />;
  }
}
