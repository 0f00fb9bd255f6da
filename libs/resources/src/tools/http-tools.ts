import { DomainError } from '@libs/protocol';
import { resolveEnvRefs, type HttpSourceConfig, type HttpToolSpec } from './tool-config';
import { bodyText, readCapped, text, type ToolResult } from './tool-result';

/** Where a call's parameters go when the tool does not say: the query for GET and DELETE, else a JSON body. */
export function parametersIn(spec: HttpToolSpec): 'query' | 'body' {
  return spec.parameters_in ?? (spec.method === 'GET' || spec.method === 'DELETE' ? 'query' : 'body');
}

function queryValue(v: unknown): string {
  return typeof v === 'string' ? v : JSON.stringify(v);
}

/**
 * Calls one HTTP tool: one request with the parameters as query string or JSON body. A non-2xx
 * status is a tool failure (`is_error`); an unreachable server is `unavailable`; a body over
 * `maxBytes` is read no further and comes back cut, with a marker (ToolsService bounds the rest).
 */
export async function callHttpTool(
  sourceId: string,
  config: HttpSourceConfig,
  spec: HttpToolSpec,
  args: Record<string, unknown>,
  signal: AbortSignal,
  maxBytes: number,
  secret: (name: string) => string | null,
): Promise<ToolResult> {
  const headers: Record<string, string> = {
    accept: 'application/json, text/*;q=0.9, */*;q=0.5',
    ...resolveEnvRefs(config.headers, `source ${sourceId} headers`, secret),
  };
  const url = new URL(spec.url);
  let body: string | undefined;
  if (parametersIn(spec) === 'query') {
    for (const [k, v] of Object.entries(args)) {
      for (const item of Array.isArray(v) ? v : [v]) {
        url.searchParams.append(k, queryValue(item));
      }
    }
  } else {
    body = JSON.stringify(args);
    headers['content-type'] = 'application/json';
  }
  let res: Response;
  try {
    res = await fetch(url, { method: spec.method, headers, body, signal, redirect: 'follow' });
  } catch (e) {
    if (signal.aborted) {
      throw e;
    }
    const cause = (e as { cause?: { message?: string } }).cause?.message ?? (e as Error).message;
    throw new DomainError('unavailable', `HTTP tool ${spec.name}: ${url.origin} cannot be reached: ${cause}`, {
      source_id: sourceId,
    });
  }
  const { bytes, truncated } = await readCapped(res.body, maxBytes);
  const contentType = res.headers.get('content-type');
  const bodyString = bodyText(bytes, contentType);
  const result: ToolResult = { is_error: !res.ok, status: res.status, content: [text(bodyString)] };
  if (truncated) {
    result.content.push(
      text(
        `[tool result truncated: the response body is over the ${maxBytes}-byte limit; only its first bytes are included.]`,
      ),
    );
    result.truncated = true;
    return result;
  }
  if (contentType && /json/i.test(contentType)) {
    try {
      const parsed: unknown = JSON.parse(bodyString);
      result.structured_content =
        typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed)
          ? (parsed as Record<string, unknown>)
          : { value: parsed };
    } catch {
      // not JSON after all: the text is the result
    }
  }
  return result;
}
