/**
 * Commands on jobs by id: open one's tab (also how restored tabs reopen), cancel it, compare
 * several.
 */
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
  /** Open the comparison of 2 to MAX_COMPARED jobs in one tab. */
  compareJobs?: (ids: string[], names?: string[]) => void;
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
  const compare = options.compareJobs;
  if (compare) {
    app.commands.addCommand(CommandIDs.compareJobs, {
      label: 'HyperPod: Compare Jobs',
      execute: args => {
        const ids = (args.ids as string[] | undefined) ?? [];
        try {
          compare(ids, args.names as string[] | undefined);
        } catch (error) {
          Notification.error(asApiError(error).message, { autoClose: 8000 });
        }
      }
    });
  }
}
