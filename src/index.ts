import {
  ILayoutRestorer,
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import {
  Dialog,
  ICommandPalette,
  MainAreaWidget,
  Notification,
  showDialog,
  showErrorMessage,
  WidgetTracker
} from '@jupyterlab/apputils';
import { PathExt } from '@jupyterlab/coreutils';
import { IDocumentManager } from '@jupyterlab/docmanager';
import { IDefaultFileBrowser } from '@jupyterlab/filebrowser';
import { ISettingRegistry } from '@jupyterlab/settingregistry';
import { ReactWidget, refreshIcon, runIcon } from '@jupyterlab/ui-components';
import * as React from 'react';

import { HyperpodClient } from './api';
import { applyFile, isJobFile } from './apply';
import { JobTab } from './components/JobView';
import { JobWidget } from './components/JobWidget';
import { HyperpodPanel, IPanelActions } from './components/Panel';
import { SubmitView } from './components/SubmitView';
import { ViewBoundary } from './components/ViewBoundary';
import { nextName, prefillFromJob } from './form';
import { jobEndNotice } from './diagnosis';
import { stallNotice } from './watchdog';
import { isSubmittable, joinPath, toPartitionPath } from './format';
import { clusterIcon } from './icons';
import { asApiError, HyperpodModel } from './model';
import { IClusterInfo, IJob, isFinished } from './models';
import { DEFAULT_SETTINGS, fromRegistry, VIEWS, ViewName } from './settings';

const PLUGIN_ID = 'jupyter-hyperpod:plugin';

export namespace CommandIDs {
  export const open = 'hyperpod:open';
  export const showView = 'hyperpod:show-view';
  export const refresh = 'hyperpod:refresh';
  export const submitFile = 'hyperpod:submit-file';
  export const submitBrowserFile = 'hyperpod:submit-browser-file';
  export const openJob = 'hyperpod:open-job';
  export const cancelJob = 'hyperpod:cancel-job';
  export const submitInMain = 'hyperpod:submit-in-main-area';
}

const VIEW_TITLES: Record<ViewName, string> = {
  cluster: 'Cluster Nodes',
  files: 'Partition Files',
  jobs: 'Jobs',
  queue: 'Cluster Queue',
  submit: 'Submit a Job'
};

const plugin: JupyterFrontEndPlugin<void> = {
  id: PLUGIN_ID,
  description:
    'A sidebar for a GPU training cluster: nodes, partition files, jobs, live logs and metrics.',
  autoStart: true,
  optional: [
    ILayoutRestorer,
    ISettingRegistry,
    ICommandPalette,
    IDocumentManager,
    IDefaultFileBrowser
  ],
  activate: (
    app: JupyterFrontEnd,
    restorer: ILayoutRestorer | null,
    settingRegistry: ISettingRegistry | null,
    palette: ICommandPalette | null,
    docManager: IDocumentManager | null,
    fileBrowser: IDefaultFileBrowser | null
  ) => {
    const { commands, shell } = app;
    const client = new HyperpodClient(app.serviceManager.serverSettings);
    const model = new HyperpodModel(client, DEFAULT_SETTINGS);
    const tracker = new WidgetTracker<MainAreaWidget<JobWidget>>({
      namespace: 'jupyter-hyperpod-job'
    });

    const showPanel = () => {
      shell.activateById(panel.id);
    };

    const openJob = (job: IJob, tab: JobTab = 'logs') => {
      const existing = tracker.find(w => w.content.jobId === job.id);
      if (existing) {
        shell.activateById(existing.id);
        return;
      }
      const reused =
        model.settings.jobTabs === 'one' ? tracker.currentWidget : null;
      if (reused && !reused.isDisposed) {
        reused.content.showJob(job, tab);
        reused.title.label = `Job: ${job.name}`;
        reused.title.caption = `${job.name} (${job.id})`;
        void tracker.save(reused);
        shell.activateById(reused.id);
        return;
      }
      const content = new JobWidget({
        model,
        job,
        initialTab: tab,
        cancelJob,
        resubmitJob,
        onJob: next => {
          model.upsertJob(next);
          widget.title.label = `Job: ${next.name}`;
          widget.title.caption = `${next.name} (${next.id})`;
        }
      });
      const widget = new MainAreaWidget({ content });
      widget.id = `jupyter-hyperpod-job-${job.id}`;
      widget.title.label = `Job: ${job.name}`;
      widget.title.caption = `${job.name} (${job.id})`;
      widget.title.icon = clusterIcon;
      widget.title.closable = true;
      void tracker.add(widget);
      shell.add(widget, 'main');
      shell.activateById(widget.id);
    };

    const cancelJob = async (job: IJob): Promise<IJob | null> => {
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
    };

    /** Cancel several jobs after one confirmation. */
    const cancelJobs = async (jobs: IJob[]): Promise<void> => {
      const running = jobs.filter(job => !isFinished(job.state));
      if (running.length === 0) {
        return;
      }
      if (running.length === 1) {
        await cancelJob(running[0]);
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
    };

    /** Remove jobs from the history, their files kept or deleted as the user chooses. */
    const removeJobs = async (jobs: IJob[]): Promise<void> => {
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
          label:
            "Also delete the job's logs and launch files (.hyperpod/jobs/…)",
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
          tracker.find(w => w.content.jobId === job.id)?.dispose();
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
    };

    const resubmitJob = async (job: IJob, excludeNodes: string[] = []) => {
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
      if (model.submitInMain) {
        submitInMain();
      } else {
        showPanel();
      }
    };

    const submitFile = (path: string) => {
      if (isJobFile(path)) {
        // The user's own manifest or sbatch script: previewed, then sent as it is.
        void applyFile(path, job => actions().onSubmitted(job));
        return;
      }
      model.requestSubmit({ template: 'script', params: { script: path } });
      showPanel();
    };

    // The Submit form in the main area: one form at a time (the sidebar points to it).
    let submitWidget: MainAreaWidget<ReactWidget> | null = null;
    const submitInMain = () => {
      if (submitWidget && !submitWidget.isDisposed) {
        shell.activateById(submitWidget.id);
        return;
      }
      const content = ReactWidget.create(
        React.createElement(
          ViewBoundary,
          { view: 'Submit' },
          React.createElement(SubmitView, {
            model,
            onSubmitted: job => actions().onSubmitted(job)
          })
        )
      );
      content.addClass('jp-hyperpod-Panel');
      content.addClass('jp-hyperpod-SubmitMain');
      const widget = new MainAreaWidget({ content });
      widget.id = 'jupyter-hyperpod-submit';
      widget.title.label = 'Submit a HyperPod job';
      widget.title.icon = runIcon;
      widget.title.closable = true;
      widget.disposed.connect(() => {
        submitWidget = null;
        model.submitInMain = false;
      });
      submitWidget = widget;
      model.submitInMain = true;
      shell.add(widget, 'main');
      shell.activateById(widget.id);
    };

    const actions = (): IPanelActions => ({
      openFile: docManager
        ? (path: string) => {
            const base = model.cluster?.filesystem.contents_path;
            if (base === null || base === undefined) {
              return;
            }
            docManager.openOrReveal(joinPath(base, path));
          }
        : undefined,
      submitFile,
      openJob: job => openJob(job),
      cancelJob: job => void cancelJob(job),
      resubmitJob: job => void resubmitJob(job),
      cancelJobs: jobs => void cancelJobs(jobs),
      removeJobs: jobs => void removeJobs(jobs),
      submitInMain,
      onSubmitted: job => {
        model.upsertJob(job);
        model.view = 'jobs';
        void model.refreshJobs();
        Notification.success(`Job ${job.name} submitted.`, { autoClose: 4000 });
        openJob(job, 'logs');
      }
    });

    // A job the user submitted ended: say so, with a button that opens it (setting: off).
    model.jobEnded.connect((_, job) => {
      if (!model.settings.notifyJobEnd) {
        return;
      }
      const note = jobEndNotice(job);
      Notification.emit(note.message, note.type, {
        autoClose: note.type === 'error' ? false : 8000,
        actions: [
          {
            label: 'Open job',
            caption: `Open ${job.name}`,
            callback: () =>
              openJob(job, note.type === 'error' ? 'logs' : 'details')
          }
        ]
      });
    });

    // A running job stalled (the server's watchdog): say so, with a button that opens it.
    model.jobStalled.connect((_, job) => {
      Notification.warning(stallNotice(job), {
        autoClose: false,
        actions: [
          {
            label: 'Open job',
            caption: `Open ${job.name}`,
            callback: () => openJob(job, 'details')
          }
        ]
      });
    });

    const panel = new HyperpodPanel(model, actions);
    panel.id = 'jupyter-hyperpod-panel';
    panel.title.icon = clusterIcon;
    panel.title.caption = 'HyperPod: cluster, files and jobs';
    shell.add(panel, 'left', { rank: 600 });
    if (restorer) {
      restorer.add(panel, 'jupyter-hyperpod-panel');
      // The job tabs open before a reload open again, on the job as it is now.
      void restorer.restore(tracker, {
        command: CommandIDs.openJob,
        args: widget => ({
          id: widget.content.jobId,
          tab: 'logs',
          restoring: true
        }),
        name: widget => widget.content.jobId
      });
    }

    if (settingRegistry) {
      void settingRegistry
        .load(PLUGIN_ID)
        .then(settings => {
          const first = fromRegistry(settings);
          model.settings = first;
          model.view = first.defaultView;
          settings.changed.connect(() => {
            model.settings = fromRegistry(settings);
          });
        })
        .catch(reason => {
          console.error('jupyter-hyperpod: cannot load settings', reason);
        });
    }

    commands.addCommand(CommandIDs.open, {
      label: 'Show HyperPod Panel',
      caption: 'Open the HyperPod sidebar',
      icon: clusterIcon,
      execute: () => showPanel()
    });
    commands.addCommand(CommandIDs.showView, {
      label: args =>
        args.view
          ? `HyperPod: ${VIEW_TITLES[args.view as ViewName]}`
          : 'HyperPod: Show View',
      execute: args => {
        const view = args.view as ViewName;
        if (VIEWS.includes(view)) {
          model.view = view;
        }
        showPanel();
      }
    });
    commands.addCommand(CommandIDs.submitInMain, {
      label: 'HyperPod: Submit a Job in the Main Area',
      caption: 'The Submit form with room for large templates',
      icon: runIcon,
      execute: () => submitInMain()
    });
    commands.addCommand(CommandIDs.refresh, {
      label: 'HyperPod: Refresh',
      icon: refreshIcon,
      execute: () => model.refresh()
    });

    const hitPath = (): string | null => {
      const node = app.contextMenuHitTest(
        element => element.dataset.path !== undefined
      );
      return node?.dataset.path ?? null;
    };
    commands.addCommand(CommandIDs.submitFile, {
      label: 'Submit as Job',
      caption: 'Open the Submit form with this script',
      icon: runIcon,
      execute: args => {
        const path = (args.path as string | undefined) ?? hitPath();
        if (path) {
          submitFile(path);
        }
      }
    });

    const browserSelection = (): string | null => {
      const item = fileBrowser?.selectedItems().next();
      if (!item || item.done || item.value.type === 'directory') {
        return null;
      }
      return item.value.path;
    };
    commands.addCommand(CommandIDs.submitBrowserFile, {
      label: 'Submit as HyperPod Job',
      caption: 'Run this script on the cluster',
      icon: runIcon,
      isVisible: () => {
        const path = browserSelection();
        return path !== null && isSubmittable(PathExt.basename(path));
      },
      execute: async () => {
        const path = browserSelection();
        if (!path) {
          return;
        }
        let cluster: IClusterInfo;
        try {
          cluster = await model.ensureCluster();
        } catch (error) {
          await showErrorMessage(
            `Cannot submit ${PathExt.basename(path)}`,
            asApiError(error).message
          );
          return;
        }
        const partitionPath = toPartitionPath(
          path,
          cluster.filesystem.contents_path ?? null
        );
        if (partitionPath === null) {
          const partition = cluster.filesystem.partition;
          await showDialog({
            title: 'Not in your cluster partition',
            body:
              `The cluster's jobs see only ${partition}. ` +
              'Copy the script there, then submit it.',
            buttons: [Dialog.okButton()]
          });
          return;
        }
        submitFile(partitionPath);
      }
    });
    commands.addCommand(CommandIDs.openJob, {
      label: 'HyperPod: Open Job',
      execute: async args => {
        const id = args.id as string;
        if (!id) {
          return;
        }
        try {
          openJob(await client.job(id), (args.tab as JobTab) ?? 'logs');
        } catch (error) {
          const apiError = asApiError(error);
          // A tab restored after a reload for a job since removed: nothing to say.
          if (!(args.restoring && apiError.status === 404)) {
            Notification.error(apiError.message, { autoClose: 8000 });
          }
        }
      }
    });
    commands.addCommand(CommandIDs.cancelJob, {
      label: 'HyperPod: Cancel Job',
      execute: async args => {
        const id = args.id as string;
        if (!id) {
          return;
        }
        try {
          await cancelJob(await client.job(id));
        } catch (error) {
          Notification.error(asApiError(error).message, { autoClose: 8000 });
        }
      }
    });

    app.contextMenu.addItem({
      command: CommandIDs.submitFile,
      selector: '.jp-hyperpod-FileRow[data-script]',
      rank: 1
    });
    app.contextMenu.addItem({
      command: CommandIDs.submitBrowserFile,
      selector: '.jp-DirListing-item[data-isdir="false"]',
      rank: 20
    });

    if (palette) {
      const category = 'HyperPod';
      palette.addItem({ command: CommandIDs.open, category });
      for (const view of VIEWS) {
        palette.addItem({
          command: CommandIDs.showView,
          category,
          args: { view }
        });
      }
      palette.addItem({ command: CommandIDs.refresh, category });
      palette.addItem({ command: CommandIDs.submitInMain, category });
    }
  }
};

export default plugin;
