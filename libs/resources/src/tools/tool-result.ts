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
  /** Set when the result was over TOOL_RESULT_MAX_BYTES and was cut to fit (see boundResult). */
  truncated?: boolean;
  /** Bytes of JSON the full result had, when it was cut. */
  original_bytes?: number;
}

export const text = (t: string) => ({ type: 'text', text: t });

export function errorResult(message: string, extra: Partial<ToolResult> = {}): ToolResult {
  return { is_error: true, content: [text(message)], ...extra };
}

export const isPlainObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/** The result as plain JSON (undefined dropped, so it encodes as a google.protobuf.Struct). */
export function plainResult(result: ToolResult): Record<string, unknown> {
  return JSON.parse(JSON.stringify(result)) as Record<string, unknown>;
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
