/** Notifications about jobs the user did not ask about just now: a job ended, a job stalled. */
import { Notification } from '@jupyterlab/apputils';

import { JobTab } from '../components/JobView';
import { jobEndNotice } from '../diagnosis';
import { HyperpodModel } from '../model';
import { IJob } from '../models';
import { stallNotice } from '../watchdog';

export function connectNotices(
  model: HyperpodModel,
  openJob: (job: IJob, tab: JobTab) => void
): void {
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
}
