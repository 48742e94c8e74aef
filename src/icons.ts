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
