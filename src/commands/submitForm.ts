/**
 * Where the Submit form is shown: in the sidebar, or in the main area (one form at a time; the
 * sidebar then points to it).
 */
import { JupyterFrontEnd } from '@jupyterlab/application';
import { MainAreaWidget } from '@jupyterlab/apputils';
import { ReactWidget, runIcon } from '@jupyterlab/ui-components';
import * as React from 'react';

import { SubmitView } from '../components/SubmitView';
import { ViewBoundary } from '../components/ViewBoundary';
import { HyperpodModel } from '../model';
import { IJob } from '../models';

export interface ISubmitFormOptions {
  shell: JupyterFrontEnd.IShell;
  model: HyperpodModel;
  /** Show the sidebar panel. */
  showPanel: () => void;
  onSubmitted: (job: IJob) => void;
}

export class SubmitForm {
  private _widget: MainAreaWidget<ReactWidget> | null = null;

  constructor(private readonly _options: ISubmitFormOptions) {}

  /** The form in the main area: opened, or shown when it already is. */
  openInMain(): void {
    const { shell, model } = this._options;
    if (this._widget && !this._widget.isDisposed) {
      shell.activateById(this._widget.id);
      return;
    }
    const content = ReactWidget.create(
      React.createElement(
        ViewBoundary,
        { view: 'Submit' },
        React.createElement(SubmitView, {
          model,
          onSubmitted: (job: IJob) => this._options.onSubmitted(job)
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
      this._widget = null;
      model.submitInMain = false;
    });
    this._widget = widget;
    model.submitInMain = true;
    shell.add(widget, 'main');
    shell.activateById(widget.id);
  }

  /** Show the form where it is: the main area when it is open there, else the sidebar. */
  show(): void {
    if (this._options.model.submitInMain) {
      this.openInMain();
    } else {
      this._options.showPanel();
    }
  }
}
