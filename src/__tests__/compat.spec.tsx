/**
 * The panel on a JupyterLab older than the one it was built with: `@jupyterlab/ui-components`
 * as JupyterLab 4.0 ships it has neither `pauseIcon` (4.4.0) nor `expandIcon` (4.1.0).
 * This file's module is that older one (jest.mock below); the views must still render.
 */
import { render, screen, fireEvent } from '@testing-library/react';
import * as React from 'react';

jest.mock('@jupyterlab/ui-components', () => {
  // The real package, less the icons JupyterLab 4.0 lacks.
  const actual = jest.requireActual('@jupyterlab/ui-components');
  const older: Record<string, unknown> = { ...actual };
  delete older.pauseIcon;
  delete older.expandIcon;
  return older;
});

import * as ui from '@jupyterlab/ui-components';

import { HyperpodClient } from '../api';
import { expandIcon, labIcon, pauseIcon } from '../compat';
import { SubmitView } from '../components/SubmitView';
import { ViewBoundary } from '../components/ViewBoundary';
import { expandFallbackIcon, pauseFallbackIcon } from '../icons';
import { HyperpodModel } from '../model';
import { ITemplateInfo, ITemplateSubmission } from '../models';

const actual = jest.requireActual('@jupyterlab/ui-components');

describe('icons newer than JupyterLab 4.0', () => {
  it('this test runs against a module without them', () => {
    expect((ui as Record<string, unknown>).pauseIcon).toBeUndefined();
    expect((ui as Record<string, unknown>).expandIcon).toBeUndefined();
  });

  it("fall back to the panel's own icons where JupyterLab has none", () => {
    expect(pauseIcon()).toBe(pauseFallbackIcon);
    expect(expandIcon()).toBe(expandFallbackIcon);
    expect(labIcon('noSuchIcon', pauseFallbackIcon, actual)).toBe(
      pauseFallbackIcon
    );
  });

  it("use JupyterLab's own where it has them (4.4 and newer)", () => {
    expect(pauseIcon(actual)).toBe(actual.pauseIcon);
    expect(expandIcon(actual)).toBe(actual.expandIcon);
    expect(pauseIcon(actual)).not.toBe(pauseFallbackIcon);
  });

  it('ignore an export that is not an icon', () => {
    expect(labIcon('pauseIcon', pauseFallbackIcon, { pauseIcon: {} })).toBe(
      pauseFallbackIcon
    );
    expect(
      labIcon('pauseIcon', pauseFallbackIcon, { pauseIcon: undefined })
    ).toBe(pauseFallbackIcon);
  });
});

const template: ITemplateInfo = {
  name: 'script',
  title: 'Run a script',
  description: 'Run a script',
  params: [
    {
      name: 'script',
      title: 'Script',
      type: 'path',
      required: true,
      default: null,
      description: '',
      choices: null,
      minimum: null,
      maximum: null,
      group: 'job',
      must_exist: false,
      program: false
    }
  ]
};

/** A client double answering the calls the Submit form makes. */
function previewClient(): HyperpodClient {
  return {
    templates: async () => [template],
    files: async () => ({
      path: '',
      entries: [],
      total: 0,
      offset: 0,
      limit: 200,
      sort: 'name'
    }),
    render: async (body: ITemplateSubmission) => ({
      format: 'command',
      language: 'shell',
      text: `python ${body.params?.script}`,
      spec: {},
      warnings: [],
      values: { script: body.params?.script ?? null }
    })
  } as unknown as HyperpodClient;
}

describe('SubmitView on JupyterLab 4.0', () => {
  it('shows the preview with its expand button (it blanked the sidebar before)', async () => {
    const model = new HyperpodModel(previewClient());
    await model.loadTemplates();
    render(<SubmitView model={model} onSubmitted={() => undefined} />);
    model.requestSubmit({ template: 'script', params: { script: 'train.py' } });
    await screen.findByText('python train.py', undefined, { timeout: 3000 });
    const expand = screen.getByTitle('Show the whole preview');
    // The fallback's own drawing, not JupyterLab's (which this module lacks).
    expect(expand.innerHTML).toContain('M4 4h6v2H7.4');
  });
});

function Broken(): JSX.Element {
  throw new Error('pauseIcon is undefined');
}

describe('ViewBoundary', () => {
  it('says which view failed and why, and leaves the others alone', () => {
    const quiet = jest.spyOn(console, 'error').mockImplementation(() => {});
    try {
      render(
        <div>
          <ViewBoundary view="Logs">
            <Broken />
          </ViewBoundary>
          <ViewBoundary view="Details">
            <p>job details</p>
          </ViewBoundary>
        </div>
      );
      expect(screen.getByRole('alert').textContent).toContain(
        'The Logs view failed: pauseIcon is undefined.'
      );
      expect(screen.getByText('job details')).toBeTruthy();
      // The extension names itself in the console, with the view.
      expect(
        quiet.mock.calls.some(call =>
          String(call[0]).includes('jupyter-hyperpod: the Logs view failed')
        )
      ).toBe(true);
    } finally {
      quiet.mockRestore();
    }
  });

  it('renders the view again on Try again', () => {
    const quiet = jest.spyOn(console, 'error').mockImplementation(() => {});
    let fail = true;
    function Flaky(): JSX.Element {
      if (fail) {
        throw new Error('not yet');
      }
      return <p>recovered</p>;
    }
    try {
      render(
        <ViewBoundary view="Cluster">
          <Flaky />
        </ViewBoundary>
      );
      expect(screen.getByRole('alert').textContent).toContain('not yet');
      fail = false;
      fireEvent.click(screen.getByRole('button', { name: 'Try again' }));
      expect(screen.getByText('recovered')).toBeTruthy();
    } finally {
      quiet.mockRestore();
    }
  });
});
