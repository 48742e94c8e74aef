/**
 * What "Resubmit" prefills: the template and parameters of the job, or the script template
 * filled from its spec, and a fresh name.
 */

import { IJob, IJobSpec, ITemplateInfo } from './models';

/** Quote an argument for display in a shell-like argument line. */
export function shellQuote(arg: string): string {
  if (/^[A-Za-z0-9_@%+=:,./-]+$/.test(arg)) {
    return arg;
  }
  return "'" + arg.replace(/'/g, "'\"'\"'") + "'";
}

/**
 * What to prefill for "Resubmit": the template and its parameters when the job came from a
 * template, else the script template filled from the spec.
 */
export function prefillFromJob(
  job: IJob,
  templates: ITemplateInfo[]
): {
  template: string;
  params: Record<string, unknown>;
  overrides?: Record<string, unknown>;
} | null {
  const spec: IJobSpec = job.spec;
  if (spec.template && templates.some(t => t.name === spec.template)) {
    const prefill: {
      template: string;
      params: Record<string, unknown>;
      overrides?: Record<string, unknown>;
    } = { template: spec.template, params: { ...(spec.params ?? {}) } };
    if (spec.overrides && Object.keys(spec.overrides).length > 0) {
      prefill.overrides = { ...spec.overrides };
    }
    return prefill;
  }
  if (!templates.some(t => t.name === 'script')) {
    return null;
  }
  const [program, ...args] = spec.command ?? [];
  // The script template takes a partition path and runs in the script's folder.
  const inWorkdir =
    spec.workdir && program && !program.startsWith('/') && program.includes('.')
      ? `${spec.workdir.replace(/\/+$/, '')}/${program.replace(/^\.\//, '')}`
      : program;
  // What the script template has no field for is kept as it was.
  const overrides: Record<string, unknown> = {};
  for (const [key, fallback] of Object.entries(SPEC_DEFAULTS)) {
    const value = (spec as unknown as Record<string, unknown>)[key];
    if (value !== undefined && value !== null && value !== fallback) {
      overrides[key] = value;
    }
  }
  const params: Record<string, unknown> = {
    script: inWorkdir ?? '',
    args: args.map(shellQuote).join(' '),
    nodes: spec.nodes,
    procs_per_node: spec.procs_per_node,
    gpus_per_node: spec.gpus_per_node,
    env: spec.env ?? {},
    time_limit_minutes: spec.time_limit_minutes ?? null,
    queue: spec.queue ?? null,
    image: spec.image ?? null
  };
  return Object.keys(overrides).length > 0
    ? { template: 'script', params, overrides }
    : { template: 'script', params };
}

/** JobSpec fields the script template has no field for, with the server's defaults. */
const SPEC_DEFAULTS: Record<string, unknown> = {
  launcher: 'auto',
  kind: null,
  namespace: null,
  auto_resume: false,
  max_retries: 0,
  efa_per_node: 0,
  healthy_nodes_only: false
};

/** A fresh name for a resubmitted job: "train-1" -> "train-2", "train" -> "train-2". */
export function nextName(name: string): string {
  const match = /^(.*?)-(\d+)$/.exec(name);
  if (match && match[2].length < 4) {
    return `${match[1]}-${Number(match[2]) + 1}`;
  }
  const base = name.slice(0, 49).replace(/-+$/, '');
  return `${base}-2`;
}
