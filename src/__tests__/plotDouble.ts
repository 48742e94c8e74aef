/**
 * uPlot draws on a canvas, which jsdom lacks: a double that records what each chart is given.
 * A spec installs it with `jest.mock('uplot', () => require('./plotDouble').fakeUplot)`.
 */
export interface IPlot {
  /** The `data-metric` of the chart's figure (null for a chart outside one). */
  metric: string | null;
  labels: string[];
  colors: string[];
  data: unknown;
}

/** The charts now on the page (a destroyed chart leaves). */
export const plots: IPlot[] = [];

export const fakeUplot = jest
  .fn()
  .mockImplementation((options: any, data: unknown, host: HTMLElement) => {
    const plot: IPlot & Record<string, unknown> = {
      width: 200,
      metric: host.closest('figure')?.getAttribute('data-metric') ?? null,
      labels: options.series.slice(1).map((s: any) => s.label),
      colors: options.series.slice(1).map((s: any) => s.stroke),
      data,
      setData(next: unknown) {
        plot.data = next;
      },
      setSize: () => undefined,
      destroy: () => {
        plots.splice(plots.indexOf(plot), 1);
      }
    };
    plots.push(plot);
    return plot;
  });

(globalThis as any).ResizeObserver = class {
  observe() {
    return undefined;
  }
  disconnect() {
    return undefined;
  }
};

/** The chart of a metric now on the page. */
export function plotOf(metric: string): IPlot {
  const found = plots.filter(plot => plot.metric === metric);
  expect(found).toHaveLength(1);
  return found[0];
}
