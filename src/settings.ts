/** The panel's user settings (schema/plugin.json), with their defaults. */

import { ISettingRegistry } from '@jupyterlab/settingregistry';

export type ViewName = 'cluster' | 'files' | 'jobs' | 'queue' | 'submit';

export const VIEWS: ViewName[] = [
  'cluster',
  'files',
  'jobs',
  'queue',
  'submit'
];

export interface IPanelSettings {
  /** Seconds between refreshes of nodes, jobs and metrics. */
  refreshInterval: number;
  /** Lines of log shown before following live. */
  logTailLines: number;
  /** The template the Submit form starts with ('' = the server's default). */
  defaultTemplate: string;
  /** The view shown when the panel opens. */
  defaultView: ViewName;
  /** Files listed per page. */
  filesPageSize: number;
  /** A notification when a job the user submitted ends, fails or is cancelled. */
  notifyJobEnd: boolean;
  /** 'one': every job opens in the same main-area tab; 'per-job': a tab per job. */
  jobTabs: JobTabs;
}

export type JobTabs = 'one' | 'per-job';

export const DEFAULT_SETTINGS: IPanelSettings = {
  refreshInterval: 10,
  logTailLines: 1000,
  defaultTemplate: '',
  defaultView: 'cluster',
  filesPageSize: 200,
  notifyJobEnd: true,
  jobTabs: 'one'
};

function clamp(value: unknown, min: number, max: number, fallback: number) {
  const number = Number(value);
  if (!Number.isFinite(number)) {
    return fallback;
  }
  return Math.min(max, Math.max(min, Math.round(number)));
}

/** Settings from the registry's composite, with bad values replaced by defaults. */
export function readSettings(
  composite: Partial<Record<keyof IPanelSettings, unknown>>
): IPanelSettings {
  const view = String(composite.defaultView ?? DEFAULT_SETTINGS.defaultView);
  return {
    refreshInterval: clamp(
      composite.refreshInterval,
      2,
      3600,
      DEFAULT_SETTINGS.refreshInterval
    ),
    logTailLines: clamp(
      composite.logTailLines,
      10,
      100000,
      DEFAULT_SETTINGS.logTailLines
    ),
    defaultTemplate: String(composite.defaultTemplate ?? ''),
    defaultView: (VIEWS as string[]).includes(view)
      ? (view as ViewName)
      : DEFAULT_SETTINGS.defaultView,
    filesPageSize: clamp(
      composite.filesPageSize,
      20,
      5000,
      DEFAULT_SETTINGS.filesPageSize
    ),
    notifyJobEnd: composite.notifyJobEnd !== false,
    jobTabs: composite.jobTabs === 'per-job' ? 'per-job' : 'one'
  };
}

export function fromRegistry(
  settings: ISettingRegistry.ISettings
): IPanelSettings {
  return readSettings(settings.composite as any);
}
