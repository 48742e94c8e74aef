import { LabIcon } from '@jupyterlab/ui-components';

/** The sidebar icon: three stacked nodes, drawn with the theme's icon colour. */
const clusterSvg = `<svg xmlns="http://www.w3.org/2000/svg" width="16" height="16" viewBox="0 0 24 24">
  <g class="jp-icon3" fill="#616161">
    <path d="M4 3h16a1 1 0 0 1 1 1v4a1 1 0 0 1-1 1H4a1 1 0 0 1-1-1V4a1 1 0 0 1 1-1zm2 2.5a1 1 0 1 0 0 2 1 1 0 0 0 0-2zM4 10h16a1 1 0 0 1 1 1v4a1 1 0 0 1-1 1H4a1 1 0 0 1-1-1v-4a1 1 0 0 1 1-1zm2 2.5a1 1 0 1 0 0 2 1 1 0 0 0 0-2zM4 17h16a1 1 0 0 1 1 1v2a1 1 0 0 1-1 1H4a1 1 0 0 1-1-1v-2a1 1 0 0 1 1-1z"/>
    <rect x="10" y="5.25" width="8" height="1.5" rx=".75" fill="#fff"/>
    <rect x="10" y="12.25" width="8" height="1.5" rx=".75" fill="#fff"/>
  </g>
</svg>`;

export const clusterIcon = new LabIcon({
  name: 'jupyter-hyperpod:cluster',
  svgstr: clusterSvg
});

/** Pause, for JupyterLab before 4.4 (no `pauseIcon`; see compat.ts). */
export const pauseFallbackIcon = new LabIcon({
  name: 'jupyter-hyperpod:pause',
  svgstr: `<svg xmlns="http://www.w3.org/2000/svg" width="16" height="16" viewBox="0 0 24 24">
  <g class="jp-icon3" fill="#616161"><path d="M6 5h4v14H6zM14 5h4v14h-4z"/></g>
</svg>`
});

/** Expand (two outward arrows), for JupyterLab before 4.1 (no `expandIcon`; see compat.ts). */
export const expandFallbackIcon = new LabIcon({
  name: 'jupyter-hyperpod:expand',
  svgstr: `<svg xmlns="http://www.w3.org/2000/svg" width="16" height="16" viewBox="0 0 24 24">
  <g class="jp-icon3" fill="#616161"><path d="M4 4h6v2H7.4l4.3 4.3-1.4 1.4L6 7.4V10H4zM20 20h-6v-2h2.6l-4.3-4.3 1.4-1.4 4.3 4.3V14h2z"/></g>
</svg>`
});
