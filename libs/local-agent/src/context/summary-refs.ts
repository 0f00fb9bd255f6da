import type { ChatMessage } from '../host-port';
import { estimateTextTokens } from './tokens';

/*
 * The reference block of a summary (docs/local-agent.md#summaries): exact identifier-like tokens and file paths
 * from the omitted messages, so compaction never loses a value the user may ask for verbatim.
 */

const MAX_REFS = 40;
const MAX_DEPTH = 6;
const REF = /(?<![A-Za-z0-9_.:/-])(?:[A-Za-z][A-Za-z0-9]*[_.:/-]){2,}[A-Za-z0-9][A-Za-z0-9_.:/-]*/g;
export const REFS_GUIDANCE =
  'Exact opaque values from omitted messages; when asked for a passcode, secret, sentinel or identifier, reply with the full matching value verbatim.';

export interface SummaryRefs {
  refs: string[];
  files: string[];
}

function addUnique(list: string[], value: string): void {
  if (value !== '' && !list.includes(value)) {
    list.push(value);
  }
}

function refsInText(text: string, out: SummaryRefs): void {
  for (const m of text.matchAll(REF)) {
    addUnique(out.refs, m[0].replace(/[.,;:)]+$/, ''));
  }
}

function walk(value: unknown, depth: number, out: SummaryRefs): void {
  if (depth > MAX_DEPTH) {
    return;
  }
  if (typeof value === 'string') {
    refsInText(value, out);
  } else if (Array.isArray(value)) {
    value.forEach((v) => walk(v, depth + 1, out));
  } else if (value && typeof value === 'object') {
    const obj = value as Record<string, unknown>;
    if (typeof obj.path === 'string' && obj.path !== '') {
      addUnique(out.files, obj.path);
    }
    Object.values(obj).forEach((v) => walk(v, depth + 1, out));
  }
}

function walkString(text: string, out: SummaryRefs): void {
  const t = text.trim();
  if (t.startsWith('{') || t.startsWith('[')) {
    try {
      walk(JSON.parse(t), 0, out);
      return;
    } catch {
      // not JSON: scan as text
    }
  }
  refsInText(text, out);
}

/** Refs and files carried in an older summary's block. */
function carriedRefs(text: string, out: SummaryRefs): void {
  for (const [, body] of text.matchAll(/<critical_refs>([\s\S]*?)<\/critical_refs>/g)) {
    for (const line of body.split('\n')) {
      const m = /^\s*-\s+(\S.*)$/.exec(line);
      if (m) {
        addUnique(out.refs, m[1].trim());
      }
    }
  }
  for (const [, body] of text.matchAll(/<files>([\s\S]*?)<\/files>/g)) {
    for (const line of body.split('\n')) {
      const m = /^\s*-\s+path=(.+)$/.exec(line);
      if (m) {
        addUnique(out.files, m[1].trim());
      }
    }
  }
}

/** Refs and file paths of `messages` (older summaries' blocks carried forward), at most 40 in all. */
export function collectRefs(messages: readonly ChatMessage[]): SummaryRefs {
  const out: SummaryRefs = { refs: [], files: [] };
  for (const m of messages) {
    if (typeof m.content === 'string') {
      carriedRefs(m.content, out);
      walkString(m.content.replace(/<critical_refs>[\s\S]*?<\/critical_refs>|<files>[\s\S]*?<\/files>/g, ''), out);
    } else if (Array.isArray(m.content)) {
      for (const el of m.content) {
        if (el.type === 'text' && typeof el.text === 'string') {
          walkString(el.text, out);
        }
        if (typeof el.file_name === 'string') {
          refsInText(el.file_name, out);
        }
      }
    }
    for (const c of m.tool_calls ?? []) {
      walkString(c.function?.arguments ?? '', out);
    }
  }
  const files = out.files.slice(0, MAX_REFS);
  return { files, refs: out.refs.slice(0, Math.max(0, MAX_REFS - files.length)) };
}

export function renderRefs(refs: SummaryRefs): string {
  const parts: string[] = [];
  if (refs.refs.length > 0) {
    parts.push(['<critical_refs>', REFS_GUIDANCE, ...refs.refs.map((r) => `- ${r}`), '</critical_refs>'].join('\n'));
  }
  if (refs.files.length > 0) {
    parts.push(['<files>', ...refs.files.map((f) => `- path=${f}`), '</files>'].join('\n'));
  }
  return parts.join('\n');
}

/** The longest prefix of `text` within `maxTokens` by the estimator. */
export function truncateToTokens(text: string, maxTokens: number): string {
  if (estimateTextTokens(text) <= maxTokens) {
    return text;
  }
  let lo = 0;
  let hi = text.length;
  while (lo < hi) {
    const mid = Math.ceil((lo + hi) / 2);
    if (estimateTextTokens(text.slice(0, mid)) <= maxTokens) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return text.slice(0, lo);
}

const OPEN = '<conversation_summary>';
const CLOSE = '</conversation_summary>';

/**
 * `summary` (a closed <conversation_summary>) with the reference block inside its closing tag,
 * within `maxTokens`: the body is cut before a reference is; whole ref lines are dropped last.
 */
export function attachRefs(summary: string, refs: SummaryRefs, maxTokens: number): string {
  if (refs.refs.length === 0 && refs.files.length === 0) {
    return summary;
  }
  const body = summary.replace(OPEN, '').replace(CLOSE, '').trim();
  const block = renderRefs(refs);
  const full = `${OPEN}\n${body}\n${block}\n${CLOSE}`;
  if (estimateTextTokens(full) <= maxTokens) {
    return full;
  }
  const frame = estimateTextTokens(`${OPEN}\n\n${block}\n${CLOSE}`);
  if (frame < maxTokens) {
    const kept = truncateToTokens(body, maxTokens - frame);
    if (kept.trim() !== '') {
      return `${OPEN}\n${kept}\n${block}\n${CLOSE}`;
    }
  }
  const minimal = `${OPEN}\nv=1 references=preserved\n${block}\n${CLOSE}`;
  if (estimateTextTokens(minimal) <= maxTokens) {
    return minimal;
  }
  // Too small for the whole block: keep as many whole refs as fit (never a cut identifier).
  const kept: SummaryRefs = { refs: [], files: [] };
  const fits = () =>
    estimateTextTokens(`${OPEN}\nv=1 references=preserved\n${renderRefs(kept)}\n${CLOSE}`) <= maxTokens;
  for (const r of refs.refs) {
    kept.refs.push(r);
    if (!fits()) {
      kept.refs.pop();
      break;
    }
  }
  for (const f of refs.files) {
    kept.files.push(f);
    if (!fits()) {
      kept.files.pop();
      break;
    }
  }
  return `${OPEN}\nv=1 references=preserved\n${renderRefs(kept)}\n${CLOSE}`;
}
