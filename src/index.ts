import {
  ILayoutRestorer,
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import { ICommandPalette, Notification } from '@jupyterlab/apputils';
import { IDocumentManager } from '@jupyterlab/docmanager';
import { IDefaultFileBrowser } from '@jupyterlab/filebrowser';
import { ISettingRegistry } from '@jupyterlab/settingregistry';

import { HyperpodClient } from './api';
import { CompareTabs } from './commands/compareTabs';
import { addFileCommands, fileSubmitter } from './commands/fileCommands';
import { addJobCommands } from './commands/jobCommands';
import { JobActions } from './commands/jobActions';
import { JobTabs } from './commands/jobTabs';
import { connectNotices } from './commands/notices';
import { addPanelCommands } from './commands/panelCommands';
import { SubmitForm } from './commands/submitForm';
import { HyperpodPanel, IPanelActions } from './components/Panel';
import { joinPath } from './format';
import { clusterIcon } from './icons';
import { HyperpodModel } from './model';
import { IJob } from './models';
import { DEFAULT_SETTINGS, fromRegistry } from './settings';

import { CommandIDs } from './commands/ids';

export { CommandIDs };

const PLUGIN_ID = 'jupyter-hyperpod:plugin';

/** The user's settings, followed as they change. */
function followSettings(
  registry: ISettingRegistry,
  model: HyperpodModel
): void {
  void registry
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

/**
 * The composition: one model over one client; the job tabs, the job actions and the form's
 * placement, each given what it needs; the panel; the commands; what a reload restores.
 */
function activate(
  app: JupyterFrontEnd,
  restorer: ILayoutRestorer | null,
  settingRegistry: ISettingRegistry | null,
  palette: ICommandPalette | null,
  docManager: IDocumentManager | null,
  fileBrowser: IDefaultFileBrowser | null
): void {
  const { shell } = app;
  const client = new HyperpodClient(app.serviceManager.serverSettings);
  const model = new HyperpodModel(client, DEFAULT_SETTINGS);
  const panel = new HyperpodPanel(model, () => panelActions);
  const showPanel = () => shell.activateById(panel.id);

  const tabs: JobTabs = new JobTabs({
    shell,
    model,
    cancelJob: job => jobs.cancel(job),
    resubmitJob: (job, excludeNodes) => void jobs.resubmit(job, excludeNodes)
  });
  const comparisons = new CompareTabs(shell, client);
  const onSubmitted = (job: IJob) => {
    model.upsertJob(job);
    model.view = 'jobs';
    void model.refreshJobs();
    Notification.success(`Job ${job.name} submitted.`, { autoClose: 4000 });
    tabs.open(job, 'logs');
  };
  const form = new SubmitForm({ shell, model, showPanel, onSubmitted });
  const jobs: JobActions = new JobActions({
    model,
    client,
    closeJob: id => tabs.close(id),
    showForm: () => form.show()
  });
  const submitFile = fileSubmitter({ model, showPanel, onSubmitted });

  const panelActions: IPanelActions = {
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
    openJob: job => tabs.open(job),
    cancelJob: job => void jobs.cancel(job),
    resubmitJob: job => void jobs.resubmit(job),
    cancelJobs: list => void jobs.cancelMany(list),
    removeJobs: list => void jobs.remove(list),
    compareJobs: list =>
      void app.commands.execute(CommandIDs.compareJobs, {
        ids: list.map(job => job.id),
        names: list.map(job => job.name)
      }),
    submitInMain: () => form.openInMain(),
    onSubmitted
  };

  connectNotices(model, (job, tab) => tabs.open(job, tab));

  panel.id = 'jupyter-hyperpod-panel';
  panel.title.icon = clusterIcon;
  panel.title.caption = 'HyperPod: cluster, files and jobs';
  shell.add(panel, 'left', { rank: 600 });
  if (restorer) {
    restorer.add(panel, 'jupyter-hyperpod-panel');
    tabs.restore(restorer);
    comparisons.restore(restorer);
  }
  if (settingRegistry) {
    followSettings(settingRegistry, model);
  }

  addPanelCommands(app, palette, {
    model,
    showPanel,
    submitInMain: () => form.openInMain()
  });
  addFileCommands(app, fileBrowser, submitFile, model);
  addJobCommands(app, {
    client,
    openJob: (job, tab) => tabs.open(job, tab),
    cancelJob: job => jobs.cancel(job),
    compareJobs: (ids, names) => comparisons.open(ids, names)
  });
}

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
  activate
};

export default plugin;
