/** Commands that show the panel and its views, refresh it, or open the form in the main area. */
import { JupyterFrontEnd } from '@jupyterlab/application';
import { ICommandPalette } from '@jupyterlab/apputils';
import { refreshIcon, runIcon } from '@jupyterlab/ui-components';

import { clusterIcon } from '../icons';
import { HyperpodModel } from '../model';
import { VIEWS, ViewName } from '../settings';
import { CommandIDs } from './ids';

const VIEW_TITLES: Record<ViewName, string> = {
  cluster: 'Cluster Nodes',
  files: 'Partition Files',
  jobs: 'Jobs',
  queue: 'Cluster Queue',
  submit: 'Submit a Job'
};

export interface IPanelCommandsOptions {
  model: HyperpodModel;
  showPanel: () => void;
  submitInMain: () => void;
}

export function addPanelCommands(
  app: JupyterFrontEnd,
  palette: ICommandPalette | null,
  options: IPanelCommandsOptions
): void {
  const { commands } = app;
  const { model, showPanel } = options;
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
    execute: () => options.submitInMain()
  });
  commands.addCommand(CommandIDs.refresh, {
    label: 'HyperPod: Refresh',
    icon: refreshIcon,
    execute: () => model.refresh()
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
