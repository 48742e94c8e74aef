/**
 * What the panel needs from JupyterLab that is newer than its support floor (JupyterLab 4.0,
 * `package.json`'s `@jupyterlab/*` ranges), looked up at run time with a fallback.
 *
 * The panel is built against the newest JupyterLab's types but runs against the shared
 * singletons of the JupyterLab the user has; a name a newer package exports is `undefined` in an
 * older one. Checked against the floor's own packages (`@jupyterlab/ui-components@4.0.0`):
 * - `pauseIcon`: ui-components 4.4.0 (the log view's Pause button);
 * - `expandIcon`: ui-components 4.1.0 (the submit preview's expand button).
 */
import * as ui from '@jupyterlab/ui-components';
import { LabIcon } from '@jupyterlab/ui-components';

import { expandFallbackIcon, pauseFallbackIcon } from './icons';

/** Whether `value` is a usable LabIcon (a shared module's export may be missing). */
function isLabIcon(value: unknown): value is LabIcon {
  return (
    typeof value === 'object' &&
    value !== null &&
    'react' in value &&
    (value as { react?: unknown }).react !== undefined &&
    typeof (value as { name?: unknown }).name === 'string'
  );
}

/**
 * The icon JupyterLab exports under `name`, or `fallback` where this JupyterLab has none.
 * `exports` is the `@jupyterlab/ui-components` module (a parameter for the tests).
 */
export function labIcon(
  name: string,
  fallback: LabIcon,
  exports: object = ui
): LabIcon {
  const icon = (exports as Record<string, unknown>)[name];
  return isLabIcon(icon) ? icon : fallback;
}

/** The Pause icon: JupyterLab's from 4.4, the panel's own before. */
export function pauseIcon(exports: object = ui): LabIcon {
  return labIcon('pauseIcon', pauseFallbackIcon, exports);
}

/** The Expand icon: JupyterLab's from 4.1, the panel's own before. */
export function expandIcon(exports: object = ui): LabIcon {
  return labIcon('expandIcon', expandFallbackIcon, exports);
}
