/** Commands on one job by id: open its tab (also how restored tabs reopen), cancel it. */
import { JupyterFrontEnd } from '@jupyterlab/application';
import { Notification } from '@jupyterlab/apputils';

import { HyperpodClient } from '../api';
import { JobTab } from '../components/JobView';
import { asApiError } from '../model';
import { IJob } from '../models';
import { CommandIDs } from './ids';

export interface IJobCommandsOptions {
  client: HyperpodClient;
  openJob: (job: IJob, tab: JobTab) => void;
  cancelJob: (job: IJob) => Promise<IJob | null>;
}

export function addJobCommands(
  app: JupyterFrontEnd,
  options: IJobCommandsOptions
): void {
  const { client } = options;
  app.commands.addCommand(CommandIDs.openJob, {
    label: 'HyperPod: Open Job',
    execute: async args => {
      const id = args.id as string;
      if (!id) {
        return;
      }
      try {
        options.openJob(await client.job(id), (args.tab as JobTab) ?? 'logs');
      } catch (error) {
        const apiError = asApiError(error);
        // A tab restored after a reload for a job since removed: nothing to say.
        if (!(args.restoring && apiError.status === 404)) {
          Notification.error(apiError.message, { autoClose: 8000 });
        }
      }
    }
  });
  app.commands.addCommand(CommandIDs.cancelJob, {
    label: 'HyperPod: Cancel Job',
    execute: async args => {
      const id = args.id as string;
      if (!id) {
        return;
      }
      try {
        await options.cancelJob(await client.job(id));
      } catch (error) {
        Notification.error(asApiError(error).message, { autoClose: 8000 });
      }
    }
  });
}
