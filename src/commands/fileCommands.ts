/**
 * "Submit as Job" on a file: the panel's Files view and JupyterLab's file browser. A user's own
 * manifest or sbatch script is previewed and sent as it is; a script opens the Submit form.
 */
import { JupyterFrontEnd } from '@jupyterlab/application';
import { Dialog, showDialog, showErrorMessage } from '@jupyterlab/apputils';
import { PathExt } from '@jupyterlab/coreutils';
import { IDefaultFileBrowser } from '@jupyterlab/filebrowser';
import { runIcon } from '@jupyterlab/ui-components';

import { applyFile, isJobFile } from '../apply';
import { isSubmittable, toPartitionPath } from '../format';
import { asApiError, HyperpodModel } from '../model';
import { IClusterInfo, IJob } from '../models';
import { CommandIDs } from './ids';

export interface IFileCommandsOptions {
  model: HyperpodModel;
  showPanel: () => void;
  onSubmitted: (job: IJob) => void;
}

/** Submit a file of the partition: applied as it is, or in the Submit form. */
export function fileSubmitter(
  options: IFileCommandsOptions
): (path: string) => void {
  return (path: string) => {
    if (isJobFile(path)) {
      // The user's own manifest or sbatch script: previewed, then sent as it is.
      void applyFile(path, job => options.onSubmitted(job));
      return;
    }
    options.model.requestSubmit({
      template: 'script',
      params: { script: path }
    });
    options.showPanel();
  };
}

export function addFileCommands(
  app: JupyterFrontEnd,
  fileBrowser: IDefaultFileBrowser | null,
  submitFile: (path: string) => void,
  model: HyperpodModel
): void {
  const { commands } = app;
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
}
