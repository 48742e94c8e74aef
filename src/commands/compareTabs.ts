/**
 * The comparison tab: one per set of jobs (the same set compared again shows its tab), restored
 * after a reload.
 */
import { ILayoutRestorer, JupyterFrontEnd } from '@jupyterlab/application';
import { MainAreaWidget, WidgetTracker } from '@jupyterlab/apputils';

import { MAX_COMPARED } from '../api';
import {
  CompareClient,
  compareKey,
  CompareWidget
} from '../components/compare/CompareView';
import { clusterIcon } from '../icons';
import { CommandIDs } from './ids';

export class CompareTabs {
  readonly tracker = new WidgetTracker<MainAreaWidget<CompareWidget>>({
    namespace: 'jupyter-hyperpod-compare'
  });

  constructor(
    private readonly _shell: JupyterFrontEnd.IShell,
    private readonly _client: CompareClient
  ) {}

  /** Show the comparison of `ids` (2 to MAX_COMPARED), `names` for its title. */
  open(ids: string[], names: string[] = ids): MainAreaWidget<CompareWidget> {
    if (ids.length < 2 || ids.length > MAX_COMPARED) {
      throw new Error(
        `Compare takes 2 to ${MAX_COMPARED} jobs (got ${ids.length}).`
      );
    }
    const key = compareKey(ids);
    const existing = this.tracker.find(w => w.content.key === key);
    if (existing) {
      this._shell.activateById(existing.id);
      return existing;
    }
    const content = new CompareWidget({ client: this._client, ids }, names);
    const widget = new MainAreaWidget({ content });
    widget.id = `jupyter-hyperpod-compare-${key.replace(/[^\w-]+/g, '_')}`;
    widget.title.label = `Compare: ${names.join(' · ')}`;
    widget.title.caption = `Compare ${ids.join(', ')}`;
    widget.title.icon = clusterIcon;
    widget.title.closable = true;
    void this.tracker.add(widget);
    this._shell.add(widget, 'main');
    this._shell.activateById(widget.id);
    return widget;
  }

  /** The comparisons open before a reload open again. */
  restore(restorer: ILayoutRestorer): void {
    void restorer.restore(this.tracker, {
      command: CommandIDs.compareJobs,
      args: widget => ({
        ids: widget.content.ids,
        names: widget.content.names
      }),
      name: widget => widget.content.key
    });
  }
}
