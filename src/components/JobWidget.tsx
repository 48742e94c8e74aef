import { ReactWidget } from '@jupyterlab/ui-components';
import * as React from 'react';

import { IJob } from '../models';
import { IJobViewProps, JobTab, JobView } from './JobView';
import { ViewBoundary } from './ViewBoundary';

/** A job's details, logs and metrics, in the main area. */
export class JobWidget extends ReactWidget {
  constructor(private _props: IJobViewProps) {
    super();
    this.jobId = _props.job.id;
    this.addClass('jp-hyperpod-JobWidget');
  }

  /** The job shown (another one after `showJob`). */
  jobId: string;

  /** Show another job in this widget (the "one job tab" setting). */
  showJob(job: IJob, tab: JobTab): void {
    this.jobId = job.id;
    this._props = { ...this._props, job, initialTab: tab };
    this._serial += 1;
    this.update();
  }

  /** Switch to a tab (used when the widget is already open). */
  showTab(tab: JobTab): void {
    this._props = { ...this._props, initialTab: tab };
    this._serial += 1;
    this.update();
  }

  render(): JSX.Element {
    return (
      <ViewBoundary view="Job">
        <JobView
          key={this._serial}
          {...this._props}
          onJob={this._onJob}
          onShown={this._onShown}
          isVisible={this._isVisible}
        />
      </ViewBoundary>
    );
  }

  private _onJob = (job: IJob) => {
    this._props.onJob?.(job);
    this._props = { ...this._props, job };
  };

  private _onShown = (job: IJob) => {
    this._props.onShown?.(job);
    this._props = { ...this._props, job };
  };

  private _isVisible = () => this.isVisible;
  private _serial = 0;
}
