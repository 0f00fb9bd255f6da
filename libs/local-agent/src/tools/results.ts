import type { JsonObject } from '../host-port';

/*
 * What the model and the tool.call.completed event see of a tool result
 * (docs/local-agent.md#what-the-model-sees-of-a-result): MCP text blocks flattened, file references
 * as a reference payload, long results as a bounded preview with a marker, errors as "Error: ...",
 * and `terminate` never shown to the model.
 */

const MAX_REFS = 20;
const MAX_DEPTH = 6;
const REF_KEYS = ['file_refs', 'files', 'attachments', 'items', 'result', 'structured_content'];
const REF_FIELDS = ['path', 'file_name', 'name', 'mime_type', 'size', 'size_bytes', 'source', 'summary', 'metadata'];
export const REFS_NEXT_STEP =
  'For sandbox files, call the sandbox-provided file tools with the returned file reference.';

const isObject = (v: unknown): v is JsonObject => typeof v === 'object' && v !== null && !Array.isArray(v);
const isTextBlock = (v: unknown) => isObject(v) && v.type === 'text' && typeof v.text === 'string';

/** The host's ToolResult shape `{is_error, content: [blocks], structured_content?}`. */
function isHostToolResult(v: unknown): v is { is_error: boolean; content: unknown[]; structured_content?: unknown } {
  return isObject(v) && typeof v.is_error === 'boolean' && Array.isArray(v.content);
}

/** The tool's own verdict: a host ToolResult with is_error is a failure the model should see. */
export function toolReportedError(raw: unknown): string | null {
  if (!isHostToolResult(raw) || !raw.is_error) {
    return null;
  }
  const text = raw.content
    .filter(isTextBlock)
    .map((b) => (b as { text: string }).text)
    .join('\n');
  return text || 'the tool reported an error';
}

/** An outcome terminates the loop iff it succeeded and its result says `terminate: true`. */
export function isTerminate(raw: unknown): boolean {
  if (!isObject(raw)) {
    return false;
  }
  return raw.terminate === true || (isObject(raw.structured_content) && raw.structured_content.terminate === true);
}

function withoutTerminate(raw: unknown): unknown {
  if (!isObject(raw)) {
    return raw;
  }
  const { terminate: _t, ...rest } = raw;
  if (isObject(rest.structured_content) && 'terminate' in rest.structured_content) {
    const { terminate: _s, ...sc } = rest.structured_content;
    rest.structured_content = sc;
  }
  return rest;
}

function blockText(b: unknown): string {
  if (isTextBlock(b)) {
    return (b as { text: string }).text;
  }
  const o = isObject(b) ? b : {};
  const kind = typeof o.type === 'string' ? o.type : 'content';
  const mime = typeof o.mimeType === 'string' ? `: ${o.mimeType}` : '';
  const uri = isObject(o.resource) && typeof o.resource.uri === 'string' ? ` ${o.resource.uri}` : '';
  return `[${kind}${mime}${uri}]`;
}

/** The model-facing text of a successful result. */
export function serializeToolResult(raw: unknown): string {
  let value = withoutTerminate(raw);
  if (isHostToolResult(value)) {
    if (value.content.length === 0 && isObject(value.structured_content)) {
      value = value.structured_content;
    } else if (value.content.some((b) => !isTextBlock(b))) {
      // Mixed MCP content: the text as text, other blocks (images, resources) named, never their
      // base64 bytes in the model's context.
      return value.content.map(blockText).join('\n');
    } else {
      value = value.content;
    }
  }
  if (typeof value === 'string') {
    return value;
  }
  if (Array.isArray(value) && value.length > 0 && value.every(isTextBlock)) {
    return value.map((b) => (b as { text: string }).text).join('\n');
  }
  try {
    return JSON.stringify(value ?? null) ?? String(value);
  } catch {
    return String(value);
  }
}

/** Dicts with a string `path` in the result (file references), at most 20. */
export function extractFileRefs(raw: unknown): JsonObject[] {
  const refs: JsonObject[] = [];
  const seen = new Set<string>();
  const walk = (v: unknown, depth: number) => {
    if (depth > MAX_DEPTH || refs.length >= MAX_REFS) {
      return;
    }
    if (Array.isArray(v)) {
      v.forEach((x) => walk(x, depth + 1));
      return;
    }
    if (!isObject(v)) {
      return;
    }
    if (typeof v.path === 'string' && v.path !== '' && !seen.has(v.path)) {
      seen.add(v.path);
      const ref: JsonObject = {};
      for (const f of REF_FIELDS) {
        if (v[f] !== undefined && v[f] !== null) {
          ref[f] = v[f];
        }
      }
      refs.push(ref);
    }
    for (const k of REF_KEYS) {
      if (k in v) {
        walk(v[k], depth + 1);
      }
    }
  };
  walk(raw, 0);
  return refs;
}

export interface BoundedResult {
  /** The tool message content. */
  content: string;
  /** The preview or reference payload when one was built (else the event carries the raw result). */
  payload: JsonObject | null;
}

const marker = (total: number, kept: number) =>
  `\n\n[tool result truncated: original_chars=${total}, kept_chars=${kept}. Only the leading content is included. ` +
  'For large outputs, tools should return sandbox file references instead of inline content.]';

function preview(text: string, max: number): BoundedResult {
  const kept = text.slice(0, max);
  return {
    content: kept + marker(text.length, kept.length),
    payload: {
      type: 'langbot_tool_result_preview',
      truncated: true,
      reason: 'tool_result_truncated',
      original_chars: text.length,
      original_bytes: Buffer.byteLength(text),
      kept_preview_chars: kept.length,
      preview: kept,
    },
  };
}

/**
 * Bounds a result (or an error) to `max` characters for the model
 * (docs/local-agent.md#what-the-model-sees-of-a-result).
 */
export function boundToolResult(raw: unknown, error: string | null, max: number): BoundedResult {
  if (error !== null) {
    const text = `Error: ${error}`;
    return text.length > max
      ? { content: preview(text, max).content, payload: null }
      : { content: text, payload: null };
  }
  const text = serializeToolResult(raw);
  const refs = extractFileRefs(withoutTerminate(raw));
  if (refs.length > 0) {
    const payload: JsonObject = {
      type: 'tool result references',
      file_refs: refs,
      original_chars: text.length,
      next_step: REFS_NEXT_STEP,
      ...(text.length <= max
        ? { result: withoutTerminate(raw), truncated: false }
        : { truncated: true, kept_preview_chars: Math.min(max, text.length), preview: text.slice(0, max) }),
    };
    return { content: JSON.stringify(payload), payload };
  }
  if (text.length > max) {
    return preview(text, max);
  }
  return { content: text, payload: null };
}

/** The `result` of tool.call.completed: the payload if built, else the raw result (non-objects wrapped). */
export function eventResult(raw: unknown, bounded: BoundedResult, error: string | null): JsonObject | null {
  if (error !== null) {
    return null;
  }
  if (bounded.payload) {
    return bounded.payload;
  }
  if (raw === null || raw === undefined) {
    return null;
  }
  return isObject(raw) ? raw : { value: raw };
}
