import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';

import { IErrorBody } from './models';

/** Where the server extension answers, below the server's base URL. */
export const API_NAMESPACE = 'hyperpod/api';

/**
 * An error answered by the server (or the network), in words a person understands.
 */
export class ApiError extends Error {
  constructor(
    message: string,
    readonly status: number,
    readonly code: string,
    readonly field: string | null = null
  ) {
    super(message);
    this.name = 'ApiError';
  }

  /** True when the cluster (not the request) is at fault and a retry may work. */
  get unreachable(): boolean {
    return this.status === 503 || this.status === 0;
  }
}

/** The sentence shown to a person for an HTTP status without a usable body. */
export function describeStatus(status: number): string {
  if (status === 0) {
    return 'Cannot reach the Jupyter server. Check your network connection.';
  }
  if (status === 401 || status === 403) {
    return 'You are not signed in to the Jupyter server any more. Reload the page to sign in again.';
  }
  if (status === 404) {
    return 'Not found. The HyperPod server extension may not be enabled on this server.';
  }
  if (status === 503) {
    return 'The cluster cannot be reached right now. It will be retried.';
  }
  if (status >= 500) {
    return `The server failed (HTTP ${status}). See the Jupyter server log for details.`;
  }
  return `The request failed (HTTP ${status}).`;
}

/**
 * Whether a refusal is about the Jupyter session (sign in again), not about what was asked:
 * a 401, or the server's own 403 (no login, no XSRF cookie). A 403 with another code (a path
 * outside the partition, AWS or Slurm refusing) is shown as the server words it.
 */
export function isSignInProblem(
  status: number,
  error: IErrorBody | null
): boolean {
  if (status === 401) {
    return true;
  }
  if (status !== 403) {
    return false;
  }
  if (!error || !error.code) {
    return true;
  }
  return (
    error.code === 'forbidden' &&
    /^(forbidden|not authenticated|.*xsrf)/i.test(error.message ?? '')
  );
}

/** Build an ApiError from a response whose body may hold {"error": {...}}. */
export function errorFromBody(status: number, body: unknown): ApiError {
  const error =
    body && typeof body === 'object' && 'error' in (body as any)
      ? ((body as any).error as IErrorBody)
      : null;
  if (error && typeof error.message === 'string' && error.message) {
    let message = error.message;
    if (isSignInProblem(status, error)) {
      message = `${describeStatus(status)} (${error.message})`;
    } else if (status === 503) {
      message = `The cluster cannot be reached: ${error.message}`;
    }
    return new ApiError(
      message,
      status,
      error.code || String(status),
      error.field ?? null
    );
  }
  return new ApiError(describeStatus(status), status, String(status));
}

/**
 * Call the hyperpod REST API.
 *
 * @param endPoint path below `{baseUrl}hyperpod/api/`, with its query string
 * @param init request options; a plain object `body` must already be JSON text
 * @param settings server settings (tests pass their own fetch here)
 */
export async function requestAPI<T>(
  endPoint = '',
  init: RequestInit = {},
  settings: ServerConnection.ISettings = ServerConnection.makeSettings()
): Promise<T> {
  const url = URLExt.join(settings.baseUrl, API_NAMESPACE, endPoint);
  let response: Response;
  try {
    response = await ServerConnection.makeRequest(url, init, settings);
  } catch (error) {
    throw new ApiError(describeStatus(0), 0, 'network');
  }
  const text = await response.text();
  let data: any = null;
  if (text.length > 0) {
    try {
      data = JSON.parse(text);
    } catch (error) {
      data = null;
    }
  }
  if (!response.ok) {
    throw errorFromBody(response.status, data);
  }
  return data as T;
}
