import { Poll } from '@lumino/polling';
import * as React from 'react';

/**
 * Run `factory` every `seconds` with a Lumino Poll that stands by while the page (or, with
 * `isVisible`, the widget) is hidden and stops once `active` is false. Returns a function that
 * refreshes now.
 */
export function usePoll(
  factory: () => Promise<void>,
  seconds: number,
  active: boolean,
  deps: React.DependencyList,
  isVisible?: () => boolean
): () => void {
  const visibleRef = React.useRef(isVisible);
  visibleRef.current = isVisible;
  const pollRef = React.useRef<Poll | null>(null);
  const factoryRef = React.useRef(factory);
  factoryRef.current = factory;
  React.useEffect(() => {
    if (!active) {
      return;
    }
    const interval = seconds * 1000;
    const poll = new Poll({
      factory: () => factoryRef.current(),
      frequency: {
        interval,
        backoff: true,
        max: Math.max(60000, interval * 6)
      },
      standby: () =>
        (visibleRef.current ? !visibleRef.current() : false) || 'when-hidden',
      name: 'jupyter-hyperpod:job'
    });
    pollRef.current = poll;
    return () => {
      poll.dispose();
      pollRef.current = null;
    };
  }, [active, seconds, ...deps]);
  return () => {
    if (pollRef.current) {
      void pollRef.current.refresh();
    } else {
      void factoryRef.current().catch(() => undefined);
    }
  };
}
