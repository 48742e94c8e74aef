/** How the log's terminal looks in JupyterLab (theme colours, code font, search matches). */
import { ITheme } from '@xterm/xterm';

/** xterm colours from JupyterLab's theme variables (light or dark). */
export function terminalTheme(): ITheme {
  const style = getComputedStyle(document.body);
  const get = (name: string, fallback: string) =>
    style.getPropertyValue(name).trim() || fallback;
  const light = document.body.dataset.jpThemeLight !== 'false';
  return {
    foreground: get('--jp-ui-font-color0', light ? '#000' : '#fff'),
    background: get('--jp-layout-color0', light ? '#fff' : '#111'),
    cursor: get('--jp-layout-color0', light ? '#fff' : '#111'),
    selectionBackground: light
      ? 'rgba(0, 100, 200, 0.3)'
      : 'rgba(120, 170, 255, 0.35)',
    ...(light
      ? {
          yellow: '#8a6d00',
          brightYellow: '#a07f00',
          white: '#555',
          brightWhite: '#333'
        }
      : {})
  };
}

export function codeFontFamily(): string {
  const family = getComputedStyle(document.body)
    .getPropertyValue('--jp-code-font-family')
    .trim();
  return family || 'monospace';
}

export function codeFontSize(): number {
  const size = parseFloat(
    getComputedStyle(document.body).getPropertyValue('--jp-code-font-size')
  );
  return Number.isFinite(size) && size > 6 ? size : 13;
}

/** Match colours (#RRGGBB, as the addon requires) for the light or dark theme. */
export function searchDecorations(): {
  matchBackground: string;
  activeMatchBackground: string;
  matchOverviewRuler: string;
  activeMatchColorOverviewRuler: string;
} {
  const light = document.body.dataset.jpThemeLight !== 'false';
  return light
    ? {
        matchBackground: '#fff3a0',
        activeMatchBackground: '#ffb84d',
        matchOverviewRuler: '#d4b000',
        activeMatchColorOverviewRuler: '#e07000'
      }
    : {
        matchBackground: '#5c4d00',
        activeMatchBackground: '#9a5a00',
        matchOverviewRuler: '#d4b000',
        activeMatchColorOverviewRuler: '#ff9a1f'
      };
}

/** Save `text` as a file the browser downloads. */
export function saveText(text: string, filename: string): void {
  const blob = new Blob([text], { type: 'text/plain' });
  const url = URL.createObjectURL(blob);
  const anchor = document.createElement('a');
  anchor.href = url;
  anchor.download = filename;
  document.body.appendChild(anchor);
  anchor.click();
  anchor.remove();
  setTimeout(() => URL.revokeObjectURL(url), 1000);
}
