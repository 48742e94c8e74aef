/**
 * What the user does to jobs from any view: cancel (one or several, after a confirmation),
 * remove from the history, resubmit through the form.
 */
import { Dialog, Notification, showDialog } from '@jupyterlab/apputils';

import { HyperpodClient } from '../api';
import { nextName, prefillFromJob } from '../resubmit';
import { asApiError, HyperpodModel } from '../model';
import { IJob, isFinished } from '../models';

export interface IJobActionsOptions {
  model: HyperpodModel;
  client: HyperpodClient;
  /** Close the job's main-area tab, if it has one (the job was removed). */
  closeJob: (id: string) => void;
  /** Show the Submit form where it is (sidebar or main area). */
  showForm: () => void;
}

export class JobActions {
  constructor(private readonly _options: IJobActionsOptions) {}

  /** Cancel a job after a confirmation; the job as it is now, or null if kept or refused. */
  async cancel(job: IJob): Promise<IJob | null> {
    const { model, client } = this._options;
    const result = await showDialog({
      title: `Cancel ${job.name}?`,
      body:
        `The job's ${job.state === 'PENDING' ? 'request' : 'processes'} will be stopped ` +
        'on the cluster. This cannot be undone; you can resubmit it later.',
      buttons: [
        Dialog.cancelButton({ label: 'Keep it' }),
        Dialog.warnButton({ label: 'Cancel job' })
      ]
    });
    if (!result.button.accept) {
      return null;
    }
    try {
      const cancelled = await client.cancel(job.id);
      model.upsertJob(cancelled);
      void model.refreshJobs();
      if (!model.settings.notifyJobEnd) {
        // Otherwise jobEnded says it, with a button that opens the job.
        Notification.info(`Job ${job.name} was cancelled.`, {
          autoClose: 4000
        });
      }
      return cancelled;
    } catch (error) {
      Notification.error(
        `Could not cancel ${job.name}: ${asApiError(error).message}`,
        { autoClose: 8000 }
      );
      return null;
    }
  }

  /** Cancel several jobs after one confirmation. */
  async cancelMany(jobs: IJob[]): Promise<void> {
    const { model, client } = this._options;
    const running = jobs.filter(job => !isFinished(job.state));
    if (running.length === 0) {
      return;
    }
    if (running.length === 1) {
      await this.cancel(running[0]);
      return;
    }
    const result = await showDialog({
      title: `Cancel ${running.length} jobs?`,
      body:
        `${running.map(job => job.name).join(', ')} will be stopped on the cluster. ` +
        'This cannot be undone; you can resubmit them later.',
      buttons: [
        Dialog.cancelButton({ label: 'Keep them' }),
        Dialog.warnButton({ label: `Cancel ${running.length} jobs` })
      ]
    });
    if (!result.button.accept) {
      return;
    }
    const failed: string[] = [];
    for (const job of running) {
      try {
        model.upsertJob(await client.cancel(job.id));
      } catch (error) {
        failed.push(`${job.name}: ${asApiError(error).message}`);
      }
    }
    void model.refreshJobs();
    if (failed.length > 0) {
      Notification.error(`Could not cancel ${failed.join('; ')}`, {
        autoClose: 8000
      });
    }
  }

  /** Remove jobs from the history, their files kept or deleted as the user chooses. */
  async remove(jobs: IJob[]): Promise<void> {
    const { model, client } = this._options;
    if (jobs.length === 0) {
      return;
    }
    const names = jobs.length === 1 ? jobs[0].name : `${jobs.length} jobs`;
    const running = jobs.filter(job => !isFinished(job.state));
    const result = await showDialog({
      title: `Remove ${names} from the history?`,
      body:
        (jobs.length > 1 ? `${jobs.map(j => j.name).join(', ')}. ` : '') +
        (running.length > 0
          ? `${running.length === 1 && jobs.length === 1 ? 'It is' : `${running.length} of them are`} still running and will be cancelled first. `
          : '') +
        'Outputs the job wrote in your partition stay where they are.',
      checkbox: {
        label: "Also delete the job's logs and launch files (.hyperpod/jobs/…)",
        caption: 'Otherwise they stay in your partition',
        checked: false
      },
      buttons: [
        Dialog.cancelButton({ label: 'Keep' }),
        Dialog.warnButton({ label: 'Remove' })
      ]
    });
    if (!result.button.accept) {
      return;
    }
    const deleteFiles = result.isChecked === true;
    const failed: string[] = [];
    for (const job of jobs) {
      try {
        await client.forget(job.id, deleteFiles);
        model.removeJob(job.id);
        this._options.closeJob(job.id);
      } catch (error) {
        failed.push(`${job.name}: ${asApiError(error).message}`);
      }
    }
    void model.refreshJobs();
    if (failed.length > 0) {
      Notification.error(`Could not remove ${failed.join('; ')}`, {
        autoClose: 8000
      });
    } else {
      Notification.info(
        `Removed ${names} from the history${deleteFiles ? ' and deleted the files' : '; the files are kept'}.`,
        { autoClose: 5000 }
      );
    }
  }

  /** Open the form filled from the job (without `excludeNodes`, when given), with a fresh name. */
  async resubmit(job: IJob, excludeNodes: string[] = []): Promise<void> {
    const { model } = this._options;
    if (!model.templates) {
      await model.loadTemplates();
    }
    const prefill = prefillFromJob(job, model.templates ?? []);
    if (!prefill) {
      Notification.error(
        'This job cannot be resubmitted from the form: the server offers no matching template.',
        { autoClose: 8000 }
      );
      return;
    }
    if (excludeNodes.length > 0) {
      // Without the suspect nodes (Slurm --exclude, Kubernetes nodeAffinity NotIn).
      const before = (job.spec.exclude_nodes ?? []).filter(
        n => !excludeNodes.includes(n)
      );
      prefill.overrides = {
        ...(prefill.overrides ?? {}),
        exclude_nodes: [...before, ...excludeNodes]
      };
    }
    model.requestSubmit({ ...prefill, name: nextName(job.name) });
    this._options.showForm();
  }
}
