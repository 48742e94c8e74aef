/** Filtering and summing the cluster's nodes (kept out of React for tests). */

import { INode } from './models';

export interface INodeFilter {
  text: string;
  state: string;
  health: string;
}

export const EMPTY_FILTER: INodeFilter = { text: '', state: '', health: '' };

export function filterNodes(nodes: INode[], filter: INodeFilter): INode[] {
  const text = filter.text.trim().toLowerCase();
  return nodes.filter(node => {
    if (filter.state && node.state !== filter.state) {
      return false;
    }
    if (filter.health && node.health !== filter.health) {
      return false;
    }
    if (!text) {
      return true;
    }
    return (
      node.name.toLowerCase().includes(text) ||
      (node.instance_type ?? '').toLowerCase().includes(text) ||
      (node.instance_group ?? '').toLowerCase().includes(text)
    );
  });
}

export interface INodeSummary {
  nodes: number;
  healthy: number;
  unhealthy: number;
  gpusTotal: number;
  gpusAllocated: number;
  states: string[];
}

export function summarizeNodes(nodes: INode[]): INodeSummary {
  const states = new Set<string>();
  let healthy = 0;
  let unhealthy = 0;
  let gpusTotal = 0;
  let gpusAllocated = 0;
  for (const node of nodes) {
    states.add(node.state);
    if (node.health === 'healthy') {
      healthy += 1;
    } else if (node.health === 'unhealthy') {
      unhealthy += 1;
    }
    gpusTotal += node.gpus.total;
    gpusAllocated += Math.min(node.gpus.allocated, node.gpus.total);
  }
  return {
    nodes: nodes.length,
    healthy,
    unhealthy,
    gpusTotal,
    gpusAllocated,
    states: Array.from(states).sort()
  };
}

/** The rows to draw for a windowed list: [first, last) with some overscan. */
export function visibleRange(
  scrollTop: number,
  viewportHeight: number,
  rowHeight: number,
  count: number,
  overscan = 8
): [number, number] {
  if (count === 0 || rowHeight <= 0) {
    return [0, 0];
  }
  const first = Math.max(0, Math.floor(scrollTop / rowHeight) - overscan);
  const visible = Math.ceil(Math.max(viewportHeight, rowHeight) / rowHeight);
  const last = Math.min(count, first + visible + overscan * 2);
  return [first, last];
}
