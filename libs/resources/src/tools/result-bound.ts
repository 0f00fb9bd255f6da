import { canonicalJson } from '@libs/authz';
import { text, type ToolResult } from './tool-result';

/** Bytes kept free for the truncation marker and the result's own keys (TOOL_RESULT_MAX_BYTES is ≥ 1024). */
const RESERVE_BYTES = 512;

const jsonBytes = (v: unknown) => Buffer.byteLength(JSON.stringify(v));

function parsed(s: string): unknown {
  try {
    return JSON.parse(s) as unknown;
  } catch {
    return undefined;
  }
}

/**
 * True when `structured_content` repeats what `content` already carries, as the MCP spec asks
 * servers to do ("return the serialized JSON in a TextContent block") and as the reference
 * servers do: it equals the JSON of a text block, or it is a one-key wrapper around the text of
 * a text block (or of all of them, joined) or around the content blocks themselves (server-filesystem's
 * `{content: text}` / `{content: [block]}`).
 */
export function structuredRepeatsContent(result: ToolResult): boolean {
  const sc = result.structured_content;
  if (!sc) {
    return false;
  }
  const texts = result.content
    .filter((b) => b.type === 'text' && typeof b.text === 'string')
    .map((b) => b.text as string);
  const key = canonicalJson(sc);
  if (texts.some((t) => parsed(t) !== undefined && canonicalJson(parsed(t)) === key)) {
    return true;
  }
  const values = Object.values(sc);
  if (values.length !== 1) {
    return false;
  }
  const [only] = values;
  return (
    (typeof only === 'string' && (texts.includes(only) || (texts.length > 1 && only === texts.join('\n')))) ||
    (Array.isArray(only) && canonicalJson(only) === canonicalJson(result.content))
  );
}

/** The longest prefix of `s` whose JSON string encoding is at most `bytes` bytes (never half a surrogate pair). */
export function prefixWithin(s: string, bytes: number): string {
  if (bytes <= 2) {
    return '';
  }
  let k = Math.min(s.length, bytes);
  for (;;) {
    // A lone high surrogate at the cut would not survive protobuf's UTF-8.
    if (k > 0 && /[\uD800-\uDBFF]/.test(s[k - 1])) {
      k--;
    }
    const size = jsonBytes(s.slice(0, k));
    if (size <= bytes) {
      return s.slice(0, k);
    }
    // Shrink in proportion to the overshoot (escapes and multi-byte characters make size > k).
    k = Math.min(k - 1, Math.floor((k * bytes) / size));
  }
}

function describeBlock(b: Record<string, unknown>): string {
  const resource = b.resource as Record<string, unknown> | undefined;
  const mime = (b.mimeType ?? resource?.mimeType ?? 'unknown type') as string;
  return `${String(b.type)} block (${mime}, ${jsonBytes(b)} bytes)`;
}

/**
 * A result over the cap, cut to fit it (LocalAgent's bounded preview, for content blocks): a
 * repeated structured copy is dropped first; then blocks are kept in order while they fit, the
 * first that does not is cut (text: its leading part; anything else: a note naming it), the rest
 * are left out, and a last text block says so. `truncated` and `original_bytes` tell runners.
 * Structured content that is not a copy becomes a last content block of its JSON text (cut like
 * any text). The returned result's JSON is at most `maxBytes`.
 */
export function boundResult(result: ToolResult, maxBytes: number): ToolResult {
  const originalBytes = jsonBytes(result);
  if (originalBytes <= maxBytes) {
    return result;
  }
  const { structured_content: sc, ...rest } = result;
  const deduped: ToolResult = rest;
  if (sc && !structuredRepeatsContent(result)) {
    deduped.content = [...rest.content, text(JSON.stringify(sc))];
  } else if (jsonBytes(deduped) <= maxBytes) {
    // Only the repeated copy was over: nothing the tool said is lost.
    return deduped;
  }
  const kept: Record<string, unknown>[] = [];
  let room = maxBytes - RESERVE_BYTES - jsonBytes({ ...deduped, content: [], truncated: true, original_bytes: 0 });
  let omitted = 0;
  let cut: string | null = null;
  for (const block of deduped.content) {
    if (cut !== null) {
      omitted++;
      continue;
    }
    const size = jsonBytes(block) + 1;
    if (size <= room) {
      kept.push(block);
      room -= size;
      continue;
    }
    if (block.type === 'text' && typeof block.text === 'string') {
      const head = prefixWithin(block.text, room - jsonBytes({ ...block, text: '' }) - 1);
      kept.push({ ...block, text: head });
      cut = `text block cut at ${Buffer.byteLength(head)} of ${Buffer.byteLength(block.text)} bytes`;
    } else {
      cut = `${describeBlock(block)} left out`;
    }
  }
  const more = omitted > 0 ? `; ${omitted} more block${omitted === 1 ? '' : 's'} left out` : '';
  kept.push(
    text(
      `[tool result truncated: ${originalBytes} bytes of JSON is over the ${maxBytes}-byte limit; ${cut ?? 'cut'}${more}. ` +
        'Only the leading content is included.]',
    ),
  );
  return { ...deduped, content: kept, truncated: true, original_bytes: originalBytes };
}
