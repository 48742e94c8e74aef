/**
 * The jobs' main-area tabs: a job already open is shown, never twice; with the 'Job tabs'
 * setting at 'one', the tab last used shows the next job; tabs are restored after a reload.
 */
import { ILayoutRestorer, JupyterFrontEnd } from '@jupyterlab/application';
import { MainAreaWidget, WidgetTracker } from '@jupyterlab/apputils';

import { JobTab } from '../components/JobView';
import { JobWidget } from '../components/JobWidget';
import { clusterIcon } from '../icons';
import { HyperpodModel } from '../model';
import { IJob } from '../models';
import { CommandIDs } from './ids';

export interface IJobTabsOptions {
  shell: JupyterFrontEnd.IShell;
  model: HyperpodModel;
  cancelJob: (job: IJob) => Promise<IJob | null>;
  resubmitJob: (job: IJob, excludeNodes?: string[]) => void;
}

function label(widget: MainAreaWidget<JobWidget>, job: IJob): void {
  widget.title.label = `Job: ${job.name}`;
  widget.title.caption = `${job.name} (${job.id})`;
}

export class JobTabs {
  readonly tracker = new WidgetTracker<MainAreaWidget<JobWidget>>({
    namespace: 'jupyter-hyperpod-job'
  });

  constructor(private readonly _options: IJobTabsOptions) {}

  /** Show the job in its tab, the reused one, or a new one. */
  open(job: IJob, tab: JobTab = 'logs'): void {
    const { shell, model } = this._options;
    const existing = this.tracker.find(w => w.content.jobId === job.id);
    if (existing) {
      shell.activateById(existing.id);
      return;
    }
    const reused =
      model.settings.jobTabs === 'one' ? this.tracker.currentWidget : null;
    if (reused && !reused.isDisposed) {
      reused.content.showJob(job, tab);
      label(reused, job);
      void this.tracker.save(reused);
      shell.activateById(reused.id);
      return;
    }
    const content = new JobWidget({
      model,
      job,
      initialTab: tab,
      cancelJob: this._options.cancelJob,
      resubmitJob: this._options.resubmitJob,
      onJob: next => {
        model.upsertJob(next);
        label(widget, next);
      },
      onShown: next => label(widget, next)
    });
    const widget = new MainAreaWidget({ content });
    widget.id = `jupyter-hyperpod-job-${job.id}`;
    label(widget, job);
    widget.title.icon = clusterIcon;
    widget.title.closable = true;
    void this.tracker.add(widget);
    shell.add(widget, 'main');
    shell.activateById(widget.id);
  }

  /** Close the job's tab, if it has one. */
  close(id: string): void {
    this.tracker.find(w => w.content.jobId === id)?.dispose();
  }

  /** The job tabs open before a reload open again, on the job as it is now. */
  restore(restorer: ILayoutRestorer): void {
    void restorer.restore(this.tracker, {
      command: CommandIDs.openJob,
      args: widget => ({
        id: widget.content.jobId,
        tab: 'logs',
        restoring: true
      }),
      name: widget => widget.content.jobId
    });
  }
}
