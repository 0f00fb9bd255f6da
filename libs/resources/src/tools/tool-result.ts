import { DomainError } from '@libs/protocol';

/**
 * What `call_tool` returns as `result`, whatever the source: MCP-style content blocks, the
 * structured content when the tool gave one, and `is_error` when the tool ran and reported a
 * failure (an MCP `isError` result or JSON-RPC error, an HTTP tool's non-2xx status, a failed
 * fetch). HTTP tools add the response `status`.
 */
export interface ToolResult {
  is_error: boolean;
  content: Record<string, unknown>[];
  structured_content?: Record<string, unknown>;
  status?: number;
}

export const text = (t: string) => ({ type: 'text', text: t });

export function errorResult(message: string, extra: Partial<ToolResult> = {}): ToolResult {
  return { is_error: true, content: [text(message)], ...extra };
}

export const isPlainObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * The result as plain JSON (undefined dropped, so it encodes as a google.protobuf.Struct), or
 * payload_too_large when its JSON is over the cap.
 */
export function cappedResult(result: ToolResult, maxBytes: number, toolName: string): Record<string, unknown> {
  const json = JSON.stringify(result);
  const size = Buffer.byteLength(json);
  if (size > maxBytes) {
    throw new DomainError(
      'payload_too_large',
      `the result of tool ${toolName} is ${size} bytes of JSON; the limit is ${maxBytes}`,
      { tool_name: toolName, size, limit: maxBytes },
    );
  }
  return JSON.parse(json) as Record<string, unknown>;
}

/** Reads a response body up to `maxBytes`; `truncated` tells that there was more (the rest is not read). */
export async function readCapped(
  body: ReadableStream<Uint8Array> | null,
  maxBytes: number,
): Promise<{ bytes: Buffer; truncated: boolean }> {
  if (!body) {
    return { bytes: Buffer.alloc(0), truncated: false };
  }
  const reader = body.getReader();
  const chunks: Buffer[] = [];
  let size = 0;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) {
        return { bytes: Buffer.concat(chunks), truncated: false };
      }
      const room = maxBytes - size;
      if (value.byteLength > room) {
        chunks.push(Buffer.from(value.subarray(0, room)));
        return { bytes: Buffer.concat(chunks), truncated: true };
      }
      chunks.push(Buffer.from(value));
      size += value.byteLength;
    }
  } finally {
    reader.cancel().catch(() => undefined);
  }
}

const TEXTUAL = /^text\/|json|xml|javascript|x-www-form-urlencoded|yaml|csv/i;

/** A body as text when its content type is textual (or unknown); a note for binary content. */
export function bodyText(bytes: Buffer, contentType: string | null): string {
  if (!contentType || TEXTUAL.test(contentType)) {
    return bytes.toString('utf8');
  }
  return `[binary content not shown: ${contentType}, ${bytes.byteLength} bytes]`;
}
