import { DomainError } from '@libs/protocol';
import { bodyText, errorResult, readCapped, text, type ToolResult } from './tool-result';

/** What a built-in gets besides its parameters. */
export interface BuiltinContext {
  signal: AbortSignal;
  /** The result cap of the host; a built-in keeps well under it. */
  maxResultBytes: number;
}

export interface BuiltinTool {
  name: string;
  description: string;
  parameters: Record<string, unknown>;
  /** On unless an admin switched it off (and off unless one switched it on). */
  enabledByDefault: boolean;
  run(args: Record<string, unknown>, ctx: BuiltinContext): Promise<ToolResult>;
}

const FETCH_DEFAULT_BYTES = 64 * 1024;

/**
 * The local-time formatter of a time zone, or null for an unknown zone. Formatters are cached:
 * building one costs far more than formatting (a profile of the local-agent bench showed it), and
 * the IANA zones are a closed set of a few hundred (unknown names are not cached).
 */
const formatters = new Map<string, Intl.DateTimeFormat>();
function formatterFor(tz: string): Intl.DateTimeFormat | null {
  let f = formatters.get(tz);
  if (f === undefined) {
    try {
      f = new Intl.DateTimeFormat('sv-SE', { timeZone: tz, dateStyle: 'short', timeStyle: 'medium' });
    } catch {
      return null;
    }
    if (formatters.size < 1024) {
      formatters.set(tz, f);
    }
  }
  return f;
}

const currentTime: BuiltinTool = {
  name: 'current_time',
  description: 'The current date and time, in UTC or in the given IANA time zone.',
  parameters: {
    type: 'object',
    properties: { timezone: { type: 'string', description: 'IANA time zone, e.g. "Europe/Paris"; default UTC' } },
    additionalProperties: false,
  },
  enabledByDefault: true,
  run(args) {
    const timezone = typeof args.timezone === 'string' && args.timezone ? args.timezone : 'UTC';
    const formatter = formatterFor(timezone);
    if (!formatter) {
      throw new DomainError('invalid_argument', `parameters.timezone: unknown time zone "${timezone}"`, {
        field: 'parameters.timezone',
      });
    }
    const now = new Date();
    const local = formatter.format(now);
    return Promise.resolve({
      is_error: false,
      content: [text(`${local} ${timezone}`)],
      structured_content: { iso: now.toISOString(), epoch_ms: now.getTime(), timezone, local },
    });
  },
};

const httpFetch: BuiltinTool = {
  name: 'http_fetch',
  description:
    'GET an http:// or https:// URL and return its body as text (binary bodies are not shown; long bodies are truncated).',
  parameters: {
    type: 'object',
    properties: {
      url: { type: 'string', description: 'http:// or https:// URL' },
      max_bytes: { type: 'integer', minimum: 1, description: `Body bytes to read; default ${FETCH_DEFAULT_BYTES}` },
    },
    required: ['url'],
    additionalProperties: false,
  },
  enabledByDefault: false,
  async run(args, ctx) {
    let url: URL;
    try {
      url = new URL(String(args.url));
    } catch {
      throw new DomainError('invalid_argument', 'parameters.url: must be a URL', { field: 'parameters.url' });
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:') {
      throw new DomainError('invalid_argument', 'parameters.url: only http:// and https:// URLs can be fetched', {
        field: 'parameters.url',
      });
    }
    // JSON escaping can double a body: half the result cap is the most one fetch returns.
    const ceiling = Math.max(1024, Math.floor(ctx.maxResultBytes / 2) - 4096);
    const limit = Math.min(typeof args.max_bytes === 'number' ? args.max_bytes : FETCH_DEFAULT_BYTES, ceiling);
    let res: Response;
    try {
      res = await fetch(url, {
        signal: ctx.signal,
        redirect: 'follow',
        headers: { accept: 'text/*, application/json;q=0.9, */*;q=0.5', 'user-agent': 'runner-host http_fetch' },
      });
    } catch (e) {
      if (ctx.signal.aborted) {
        throw e;
      }
      const cause = (e as { cause?: { message?: string } }).cause?.message ?? (e as Error).message;
      return errorResult(`fetching ${url.href} failed: ${cause}`);
    }
    const { bytes, truncated } = await readCapped(res.body, limit);
    const contentType = res.headers.get('content-type');
    const body = bodyText(bytes, contentType);
    const meta = { url: res.url || url.href, status: res.status, content_type: contentType, bytes: bytes.byteLength };
    return {
      is_error: !res.ok,
      content: [text(res.ok ? body : `HTTP ${res.status} ${res.statusText}\n${body}`)],
      structured_content: { ...meta, truncated },
    };
  },
};

/** The built-in tools, by name. Their names are reserved: no other source's tool gets them. */
export const BUILTINS: ReadonlyMap<string, BuiltinTool> = new Map([currentTime, httpFetch].map((b) => [b.name, b]));
