import * as React from 'react';

import { visibleRange } from '../nodes';

/**
 * A windowed list of fixed-height rows: only the rows in view (plus a margin) are in the DOM,
 * so thousands of rows scroll smoothly.
 */
export function VirtualList<T>(props: {
  items: T[];
  rowHeight: number;
  renderRow: (item: T, index: number) => React.ReactNode;
  itemKey: (item: T) => string;
  ariaLabel: string;
  className?: string;
}): JSX.Element {
  const { items, rowHeight } = props;
  const ref = React.useRef<HTMLDivElement>(null);
  const [scrollTop, setScrollTop] = React.useState(0);
  const [height, setHeight] = React.useState(400);

  React.useEffect(() => {
    const element = ref.current;
    if (!element) {
      return;
    }
    setHeight(element.clientHeight || 400);
    if (typeof ResizeObserver === 'undefined') {
      return;
    }
    const observer = new ResizeObserver(() => {
      setHeight(element.clientHeight || 400);
    });
    observer.observe(element);
    return () => observer.disconnect();
  }, []);

  const [first, last] = visibleRange(
    scrollTop,
    height,
    rowHeight,
    items.length
  );
  const rows: React.ReactNode[] = [];
  for (let index = first; index < last; index++) {
    const item = items[index];
    rows.push(
      <div
        key={props.itemKey(item)}
        className="jp-hyperpod-VirtualList-row"
        role="listitem"
        style={{ top: index * rowHeight, height: rowHeight }}
      >
        {props.renderRow(item, index)}
      </div>
    );
  }
  return (
    <div
      ref={ref}
      className={`jp-hyperpod-VirtualList ${props.className ?? ''}`}
      role="list"
      aria-label={props.ariaLabel}
      tabIndex={0}
      onScroll={event => setScrollTop(event.currentTarget.scrollTop)}
    >
      <div
        className="jp-hyperpod-VirtualList-spacer"
        style={{ height: items.length * rowHeight }}
      >
        {rows}
      </div>
    </div>
  );
}
