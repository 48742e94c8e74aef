/**
 * One metric's lines drawn by uPlot, in the theme's colours: the job view's Metrics tab (one
 * job: the curve and its smoothed line) and the comparison (one line per job) both draw with it.
 */
import * as React from 'react';
import uPlot from 'uplot';

/** Axis labels that stay readable for tiny values such as learning rates. */
export function tickLabel(value: number | null): string {
  if (value === null || value === undefined || !Number.isFinite(value)) {
    return '';
  }
  if (value === 0) {
    return '0';
  }
  const magnitude = Math.abs(value);
  if (magnitude < 1e-3 || magnitude >= 1e6) {
    return value.toExponential(1);
  }
  return String(Number(value.toPrecision(3)));
}

export function cssVar(name: string, fallback: string): string {
  return (
    getComputedStyle(document.body).getPropertyValue(name).trim() || fallback
  );
}

/** A counter that changes when JupyterLab's theme changes (light/dark, or another theme). */
export function useThemeKey(): number {
  const [key, setKey] = React.useState(0);
  React.useEffect(() => {
    const watch = new MutationObserver(() => setKey(k => k + 1));
    watch.observe(document.body, {
      attributes: true,
      attributeFilter: ['data-jp-theme-light', 'data-jp-theme-name']
    });
    return () => watch.disconnect();
  }, []);
  return key;
}

/** How many distinct series colours the theme has (style/base.css --jp-hyperpod-series-N). */
export const SERIES_COLORS = 10;

/** What the series colours are when no stylesheet defines them (jsdom). */
const SERIES_FALLBACK = [
  '#1976d2',
  '#f57c00',
  '#388e3c',
  '#d32f2f',
  '#7b1fa2',
  '#0097a7',
  '#9e9d24',
  '#6d4c41',
  '#c2185b',
  '#546e7a'
];

/** The CSS variable of the n-th series' colour (a job's colour in a comparison). */
export function seriesColorVar(index: number): string {
  return `--jp-hyperpod-series-${index % SERIES_COLORS}`;
}

/** One line of a chart: its legend label and its colour as a theme variable. */
export interface ILine {
  label: string;
  /** A CSS custom property (`--jp-brand-color1`), read when the chart is built. */
  color: string;
  /** The colour when the property is not defined. */
  fallback?: string;
  width: number;
  /** Dots at each point (a short curve). */
  points?: boolean;
}

/** The n-th series' line (the comparison's lines: one colour per job). */
export function seriesLine(index: number, label: string): ILine {
  return {
    label,
    color: seriesColorVar(index),
    fallback: SERIES_FALLBACK[index % SERIES_COLORS],
    width: 2
  };
}

const HEIGHT = 180;

/**
 * A figure with the metric's name, an optional caption on the right and the lines over the step
 * axis; `data` is uPlot's aligned data (steps, then one column per line, null where a line has
 * no point). Built again when the theme or the lines change, updated in place when only the
 * data does.
 */
export function LineChart(props: {
  name: string;
  data: uPlot.AlignedData;
  lines: ILine[];
  themeKey: number;
  caption?: React.ReactNode;
}): JSX.Element {
  const hostRef = React.useRef<HTMLDivElement>(null);
  const plotRef = React.useRef<uPlot | null>(null);
  const shape = JSON.stringify(props.lines);

  React.useEffect(() => {
    const host = hostRef.current!;
    const width = Math.max(200, host.clientWidth);
    const axis = {
      stroke: cssVar('--jp-ui-font-color2', '#666'),
      grid: { stroke: cssVar('--jp-border-color2', '#ddd'), width: 1 },
      ticks: { stroke: cssVar('--jp-border-color2', '#ddd'), width: 1 }
    };
    const colors = props.lines.map(line =>
      cssVar(line.color, line.fallback ?? '#1976d2')
    );
    // The colours drawn on the canvas, readable in the page (tests, themes).
    host.dataset.axisColor = axis.stroke;
    host.dataset.lineColors = colors.join(' ');
    const plot = new uPlot(
      {
        width,
        height: HEIGHT,
        legend: { show: true },
        cursor: { drag: { x: true, y: false } },
        scales: { x: { time: false } },
        axes: [
          { ...axis, label: 'step' },
          {
            ...axis,
            size: 64,
            values: (_plot: uPlot, splits: number[]) => splits.map(tickLabel)
          }
        ],
        series: [
          { label: 'step' },
          ...props.lines.map((line, i) => ({
            label: line.label,
            stroke: colors[i],
            width: line.width,
            // Lines of jobs that log at other steps join across the steps they lack.
            spanGaps: true,
            points: { show: line.points ?? false }
          }))
        ]
      },
      props.data,
      host
    );
    plotRef.current = plot;
    const resize = new ResizeObserver(() => {
      const w = host.clientWidth;
      if (w > 0 && Math.abs(w - plot.width) > 2) {
        plot.setSize({ width: w, height: HEIGHT });
      }
    });
    resize.observe(host);
    return () => {
      resize.disconnect();
      plot.destroy();
      plotRef.current = null;
    };
  }, [props.themeKey, shape]);

  React.useEffect(() => {
    plotRef.current?.setData(props.data);
  }, [props.data]);

  return (
    <figure className="jp-hyperpod-Chart" data-metric={props.name}>
      <figcaption>
        <span className="jp-hyperpod-Chart-name">{props.name}</span>
        {props.caption}
      </figcaption>
      <div ref={hostRef} className="jp-hyperpod-Chart-plot" />
    </figure>
  );
}

/** The smoothing picker of a set of charts (0: off). */
export function SmoothingSelect(props: {
  value: number;
  onChange: (value: number) => void;
}): JSX.Element {
  return (
    <label className="jp-hyperpod-Smoothing">
      Smoothing
      <select
        className="jp-mod-styled"
        aria-label="Smoothing"
        value={String(props.value)}
        onChange={event => props.onChange(Number(event.target.value))}
      >
        <option value="0">off</option>
        <option value="0.6">0.6</option>
        <option value="0.8">0.8</option>
        <option value="0.95">0.95</option>
      </select>
    </label>
  );
}

/** System metrics' charts (CPU, memory, GPU), folded away under one summary; none: nothing. */
export function SystemChartsFold(props: {
  children: JSX.Element[];
}): JSX.Element | null {
  if (props.children.length === 0) {
    return null;
  }
  return (
    <details className="jp-hyperpod-MetricsSystem">
      <summary className="jp-hyperpod-MetricsGroup">
        System ({props.children.length}: CPU, memory, GPU)
      </summary>
      <div className="jp-hyperpod-Charts">{props.children}</div>
    </details>
  );
}
