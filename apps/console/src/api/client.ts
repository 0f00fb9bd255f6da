import createClient, { type Middleware } from 'openapi-fetch';
import type { components, paths } from './schema';

/** The API types, generated from the OpenAPI document the host serves (scripts/console-schema.js). */
export type Schemas = components['schemas'];
export type ApiError = Schemas['ProtocolErrorDto'];

const KEY_ITEM = 'runner-host.console.admin-key';

/** The admin key lives only in this tab's sessionStorage: closing the tab signs out. */
export const session = {
  key: (): string | null => sessionStorage.getItem(KEY_ITEM),
  signIn: (key: string) => sessionStorage.setItem(KEY_ITEM, key),
  signOut: () => sessionStorage.removeItem(KEY_ITEM),
};

/** Listeners told when the API refuses the key (revoked, or not an admin key). */
const refusedListeners = new Set<(status: number) => void>();
export function onKeyRefused(fn: (status: number) => void): () => void {
  refusedListeners.add(fn);
  return () => refusedListeners.delete(fn);
}

const auth: Middleware = {
  onRequest({ request }) {
    const key = session.key();
    if (key) {
      request.headers.set('authorization', `Bearer ${key}`);
    }
    return request;
  },
  onResponse({ response }) {
    if (response.status === 401 || response.status === 403) {
      for (const fn of refusedListeners) {
        fn(response.status);
      }
    }
    return response;
  },
};

/** Same origin: the console calls the host that served it (CORS stays off). */
export const api = createClient<paths>({ baseUrl: location.origin });
api.use(auth);

/** What a page shows when a call did not work: the API's error, or that the API could not be reached. */
export class CallError extends Error {
  constructor(
    readonly status: number,
    readonly error: ApiError,
  ) {
    super(error.message);
  }
  /** The input the API named (`details.field`), if any. */
  get field(): string | null {
    const f = this.error.details?.field;
    return typeof f === 'string' ? f : null;
  }
}

function apiError(status: number, body: unknown): ApiError {
  const e = (body as { error?: ApiError } | undefined)?.error;
  if (e && typeof e.message === 'string') {
    return e;
  }
  return { code: 'runtime_error', message: `HTTP ${status}`, retryable: status >= 500, details: {} };
}

/** Unwraps an openapi-fetch answer: the data, or a CallError (status 0: the API is down or unreachable). */
export async function call<T>(promise: Promise<{ data?: T; error?: unknown; response: Response }>): Promise<T> {
  let result: { data?: T; error?: unknown; response: Response };
  try {
    result = await promise;
  } catch (e) {
    throw new CallError(0, {
      code: 'unavailable',
      message: `the API could not be reached (${e instanceof Error ? e.message : String(e)})`,
      retryable: true,
      details: {},
    });
  }
  if (result.error !== undefined || !result.response.ok) {
    throw new CallError(result.response.status, apiError(result.response.status, result.error));
  }
  return result.data as T;
}
