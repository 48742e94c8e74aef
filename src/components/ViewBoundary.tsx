import * as React from 'react';

/** The props of a ViewBoundary: what the wrapped view is called, for the message. */
export interface IViewBoundaryProps {
  /** The view's name as the user sees it ("Cluster", "Logs"). */
  view: string;
  children?: React.ReactNode;
}

interface IViewBoundaryState {
  error: Error | null;
}

/**
 * Keeps one failing view from blanking the panel: an error thrown while rendering the wrapped
 * view (say, a component an older JupyterLab does not have) shows what broke and where, with a
 * way to try again; the other views keep working.
 */
export class ViewBoundary extends React.Component<
  IViewBoundaryProps,
  IViewBoundaryState
> {
  state: IViewBoundaryState = { error: null };

  static getDerivedStateFromError(error: unknown): IViewBoundaryState {
    return {
      error: error instanceof Error ? error : new Error(String(error))
    };
  }

  componentDidCatch(error: unknown, info: React.ErrorInfo): void {
    console.error(
      `jupyter-hyperpod: the ${this.props.view} view failed`,
      error,
      info.componentStack
    );
  }

  private _retry = (): void => {
    this.setState({ error: null });
  };

  render(): React.ReactNode {
    const { error } = this.state;
    if (!error) {
      return this.props.children ?? null;
    }
    return (
      <div
        className="jp-hyperpod-Message jp-mod-error jp-hyperpod-ViewError"
        role="alert"
      >
        <span className="jp-hyperpod-Message-text">
          The {this.props.view} view failed: {error.message || error.name}. The
          rest of the panel still works; reload the page if this persists, and
          report it with your JupyterLab version (Help › About JupyterLab).
        </span>
        <button
          type="button"
          className="jp-Button jp-mod-minimal jp-hyperpod-Message-retry"
          onClick={this._retry}
        >
          Try again
        </button>
      </div>
    );
  }
}
