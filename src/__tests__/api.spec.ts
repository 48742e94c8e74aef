import { ServerConnection } from '@jupyterlab/services';

import { HyperpodClient, queryString } from '../api';
import { ApiError, requestAPI } from '../handler';

interface ICall {
  url: string;
  method: string;
  body: string | null;
}

/** A client whose fetch answers from `reply` and records what was asked. */
function clientWith(
  reply: (call: ICall) => { status: number; body?: unknown; raw?: string },
  token = 'secret',
  appendToken = true
): { client: HyperpodClient; calls: ICall[] } {
  const calls: ICall[] = [];
  const fetch = async (input: RequestInfo, init?: RequestInit) => {
    const request = input as Request;
    const call: ICall = {
      // makeRequest appends a cache-busting timestamp to GETs: leave it out.
      url: (typeof input === 'string' ? input : request.url).replace(
        /[?&]\d{10,}$/,
        ''
      ),
      method: (init?.method ?? request.method ?? 'GET').toUpperCase(),
      body: init?.body
        ? String(init.body)
        : typeof input === 'string'
          ? null
          : (await request.clone().text()) || null
    };
    calls.push(call);
    const answer = reply(call);
    const text =
      answer.raw ??
      (answer.body === undefined ? '' : JSON.stringify(answer.body));
    return new Response(text, {
      status: answer.status,
      headers: { 'Content-Type': 'application/json' }
    });
  };
  const settings = ServerConnection.makeSettings({
    baseUrl: 'http://localhost:8888/lab-base/',
    wsUrl: 'ws://localhost:8888/lab-base/',
    token,
    fetch: fetch as any,
    Request: (globalThis as any).Request,
    Headers: (globalThis as any).Headers,
    appendToken
  });
  return { client: new HyperpodClient(settings), calls };
}

describe('queryString', () => {
  it('leaves out empty values and encodes the rest', () => {
    expect(queryString({ a: 'x y', b: undefined, c: null, d: '', e: 0 })).toBe(
      '?a=x+y&e=0'
    );
    expect(queryString({})).toBe('');
  });
});

describe('HyperpodClient', () => {
  it('gets the cluster under {baseUrl}hyperpod/api/', async () => {
    const { client, calls } = clientWith(() => ({
      status: 200,
      body: { orchestrator: 'local', name: 'this-machine' }
    }));
    const cluster = await client.cluster();
    expect(cluster.name).toBe('this-machine');
    expect(calls[0].url).toBe(
      'http://localhost:8888/lab-base/hyperpod/api/cluster'
    );
    expect(calls[0].method).toBe('GET');
  });

  it('unwraps nodes and templates', async () => {
    const { client } = clientWith(call => ({
      status: 200,
      body: call.url.endsWith('/nodes')
        ? { nodes: [{ name: 'n1' }] }
        : { templates: [{ name: 'script' }] }
    }));
    expect((await client.nodes()).map(n => n.name)).toEqual(['n1']);
    expect((await client.templates()).map(t => t.name)).toEqual(['script']);
  });

  it('pages and sorts files', async () => {
    const { client, calls } = clientWith(() => ({
      status: 200,
      body: { path: 'a b', entries: [], total: 0, offset: 100, limit: 50 }
    }));
    await client.files('a b', { offset: 100, limit: 50, sort: '-mtime' });
    expect(calls[0].url).toBe(
      'http://localhost:8888/lab-base/hyperpod/api/files?path=a+b&offset=100&limit=50&sort=-mtime'
    );
  });

  it('posts JSON to render and submit, deletes to cancel', async () => {
    const { client, calls } = clientWith(call => ({
      status: call.method === 'POST' && call.url.endsWith('/jobs') ? 201 : 200,
      body: { id: 'j1', format: 'command', text: 'python x.py' }
    }));
    const body = {
      name: 'demo',
      template: 'script',
      params: { script: 'x.py' }
    };
    await client.render(body);
    const job = await client.submit(body);
    await client.cancel('j/1');
    expect(job.id).toBe('j1');
    expect(calls.map(c => [c.method, c.url.split('/api/')[1]])).toEqual([
      ['POST', 'jobs/render'],
      ['POST', 'jobs'],
      ['DELETE', 'jobs/j%2F1']
    ]);
    expect(JSON.parse(calls[0].body!)).toEqual(body);
  });

  it('asks for two jobs’ diff and a comparison of several', async () => {
    const { client, calls } = clientWith(call => ({
      status: 200,
      body: call.url.includes('/diff/')
        ? { a: 'a/1', b: 'b', spec: [], configs: [], notes: [] }
        : { jobs: [], differing: ['env.LR'], metrics: [], notes: [] }
    }));
    const diff = await client.diff('a/1', 'b');
    const comparison = await client.compare(['a', 'b', 'c']);
    expect(diff.a).toBe('a/1');
    expect(comparison.differing).toEqual(['env.LR']);
    expect(calls.map(c => [c.method, c.url.split('/api/')[1]])).toEqual([
      ['GET', 'jobs/a%2F1/diff/b'],
      ['GET', 'compare?ids=a%2Cb%2Cc']
    ]);
  });

  it('passes the server’s refusal of a comparison on', async () => {
    const { client } = clientWith(() => ({
      status: 400,
      body: {
        error: {
          code: 'InvalidRequest',
          message: 'compare takes at most 10 jobs at once (got 11)',
          field: 'ids'
        }
      }
    }));
    await expect(client.compare(['a'])).rejects.toMatchObject({
      status: 400,
      message: 'compare takes at most 10 jobs at once (got 11)'
    });
  });

  it('asks for jobs, logs and metrics with their query', async () => {
    const { client, calls } = clientWith(() => ({ status: 200, body: {} }));
    await client.jobs({ state: 'RUNNING', limit: 50, offset: 0 });
    await client.jobs();
    await client.logs('j1', 2, 500);
    await client.metrics('j1');
    expect(calls.map(c => c.url.split('/api/')[1])).toEqual([
      'jobs?state=RUNNING&limit=50&offset=0',
      'jobs',
      'jobs/j1/logs?rank=2&tail=500',
      'jobs/j1/metrics'
    ]);
  });

  it('lists HyperPod clusters and posts connect', async () => {
    const { client, calls } = clientWith(call =>
      call.method === 'POST'
        ? { status: 200, body: { orchestrator: 'kubernetes', name: 'ml' } }
        : {
            status: 200,
            body: {
              region: 'us-west-2',
              clusters: [{ name: 'ml', orchestrator: 'eks', connectable: true }]
            }
          }
    );
    const list = await client.awsClusters();
    await client.awsClusters('us-west-2');
    const info = await client.awsConnect({
      cluster: 'ml',
      region: 'us-west-2'
    });
    expect(list.clusters[0].orchestrator).toBe('eks');
    expect(info.orchestrator).toBe('kubernetes');
    expect(calls.map(c => [c.method, c.url.split('/api/')[1]])).toEqual([
      ['GET', 'aws/clusters'],
      ['GET', 'aws/clusters?region=us-west-2'],
      ['POST', 'aws/connect']
    ]);
    expect(JSON.parse(calls[2].body!)).toEqual({
      cluster: 'ml',
      region: 'us-west-2'
    });
  });

  it('keeps an AWS refusal apart from a Jupyter login problem', async () => {
    const answer = (code: string, message: string) =>
      clientWith(() => ({ status: 403, body: { error: { code, message } } }));
    const aws: ApiError = await answer(
      'aws_denied',
      'no AWS credentials for sagemaker:ListClusters'
    )
      .client.awsClusters()
      .catch(e => e);
    expect(aws.message).toBe('no AWS credentials for sagemaker:ListClusters');
    expect(aws.code).toBe('aws_denied');
    const login: ApiError = await answer('forbidden', 'Forbidden')
      .client.awsClusters()
      .catch(e => e);
    expect(login.message).toMatch(/not signed in/);
  });

  it('shows a refused path as what it is, not as a sign-in problem', async () => {
    const refused: ApiError = await clientWith(() => ({
      status: 403,
      body: {
        error: {
          code: 'path_not_allowed',
          message: "'../etc' is outside your partition",
          field: 'path'
        }
      }
    }))
      .client.files('../etc')
      .catch(e => e);
    expect(refused.message).toBe("'../etc' is outside your partition");
    expect(refused.code).toBe('path_not_allowed');
    expect(refused.field).toBe('path');
    const slurm: ApiError = await clientWith(() => ({
      status: 403,
      body: {
        error: { code: 'forbidden', message: 'slurmrestd refused the token' }
      }
    }))
      .client.cluster()
      .catch(e => e);
    expect(slurm.message).toBe('slurmrestd refused the token');
    const xsrf: ApiError = await clientWith(() => ({
      status: 403,
      body: {
        error: {
          code: 'forbidden',
          message: "'_xsrf' argument missing from POST"
        }
      }
    }))
      .client.cluster()
      .catch(e => e);
    expect(xsrf.message).toMatch(/not signed in/);
  });

  it('turns a 400 with a field into an ApiError carrying the field', async () => {
    const { client } = clientWith(() => ({
      status: 400,
      body: {
        error: {
          code: 'invalid',
          message: 'Input should be less than or equal to 64',
          field: 'params.lora_r'
        }
      }
    }));
    const error: ApiError = await client
      .render({ name: 'x', template: 't', params: {} })
      .catch(e => e);
    expect(error).toBeInstanceOf(ApiError);
    expect(error.status).toBe(400);
    expect(error.field).toBe('params.lora_r');
    expect(error.message).toBe('Input should be less than or equal to 64');
    expect(error.unreachable).toBe(false);
  });

  it('explains 403 and 503 in words a person understands', async () => {
    const forbidden = clientWith(() => ({
      status: 403,
      body: { error: { code: 'forbidden', message: 'Forbidden' } }
    }));
    const e403: ApiError = await forbidden.client.cluster().catch(e => e);
    expect(e403.message).toMatch(/not signed in/);
    const down = clientWith(() => ({
      status: 503,
      body: { error: { code: 'unreachable', message: 'sinfo timed out' } }
    }));
    const e503: ApiError = await down.client.nodes().catch(e => e);
    expect(e503.message).toBe('The cluster cannot be reached: sinfo timed out');
    expect(e503.unreachable).toBe(true);
  });

  it('copes with an error without a JSON body', async () => {
    const { client } = clientWith(() => ({
      status: 502,
      raw: '<html>bad gateway'
    }));
    const error: ApiError = await client.cluster().catch(e => e);
    expect(error.status).toBe(502);
    expect(error.message).toMatch(/server failed \(HTTP 502\)/);
  });

  it('reports a network failure as status 0', async () => {
    const settings = ServerConnection.makeSettings({
      baseUrl: 'http://localhost:8888/',
      fetch: (() => Promise.reject(new TypeError('Failed to fetch'))) as any
    });
    const error = await requestAPI<ApiError>('cluster', {}, settings).catch(
      e => e
    );
    expect(error.status).toBe(0);
    expect(error.unreachable).toBe(true);
    expect(error.message).toMatch(/Cannot reach the Jupyter server/);
  });

  it('builds the log WebSocket URL with the offset and the token', () => {
    const { client } = clientWith(() => ({ status: 200 }));
    expect(client.logStreamUrl('j1', 0, new Map([[0, 1234]]))).toBe(
      'ws://localhost:8888/lab-base/hyperpod/api/jobs/j1/logs/stream?rank=0&frames=binary&offset=1234&token=secret'
    );
    expect(
      client.logStreamUrl(
        'j1',
        'all',
        new Map([
          [1, 5],
          [0, 7]
        ])
      )
    ).toBe(
      'ws://localhost:8888/lab-base/hyperpod/api/jobs/j1/logs/stream?rank=all&frames=binary&offsets=0%3A7%2C1%3A5&token=secret'
    );
  });

  it('leaves the token out where JupyterLab does (same host: the cookie)', () => {
    const { client } = clientWith(() => ({ status: 200 }), 'secret', false);
    const url = client.logStreamUrl('j1', 0, new Map([[0, 5]]));
    expect(url).toBe(
      'ws://localhost:8888/lab-base/hyperpod/api/jobs/j1/logs/stream?rank=0&frames=binary&offset=5'
    );
    expect(url).not.toContain('secret');
  });

  it('leaves the token out when there is none', () => {
    const { client } = clientWith(() => ({ status: 200 }), '');
    expect(client.logStreamUrl('j1', 1, new Map())).toBe(
      'ws://localhost:8888/lab-base/hyperpod/api/jobs/j1/logs/stream?rank=1&frames=binary&offset=0'
    );
  });
});
