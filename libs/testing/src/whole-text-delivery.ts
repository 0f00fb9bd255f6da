import { splitText, type SizeUnit } from '@libs/delivery';

/*
 * The whole-text delivery algorithms that the incremental ones of libs/delivery replaced (they
 * rescanned the whole unsent text at every delta), kept as test oracles: the incremental code must
 * give the same answers for any chunking of any text.
 */

function fencedLines(text: string): { starts: number[]; fenced: boolean[] } {
  const starts: number[] = [];
  const fenced: boolean[] = [];
  let open = false;
  let at = 0;
  for (;;) {
    starts.push(at);
    const nl = text.indexOf('\n', at);
    const line = text.slice(at, nl === -1 ? text.length : nl);
    const isFence = /^\s{0,3}(```|~~~)/.test(line);
    fenced.push(open || isFence);
    if (isFence) {
      open = !open;
    }
    if (nl === -1) {
      break;
    }
    at = nl + 1;
  }
  return { starts, fenced };
}

/** The end of the last complete paragraph outside fences followed by visible text (0: none), by rescanning `text`. */
export function wholeTextParagraphs(text: string): number {
  if (!text.includes('\n\n')) {
    return 0;
  }
  const { starts, fenced } = fencedLines(text);
  for (let li = starts.length - 1; li > 0; li--) {
    const at = starts[li];
    if (at >= 2 && text[at - 1] === '\n' && text[at - 2] === '\n' && !fenced[li] && !fenced[li - 1]) {
      if (/\S/.test(text.slice(at))) {
        return at;
      }
    }
  }
  return 0;
}

/**
 * The messages parts mode sends for an answer streamed as `deltas` and then completed as it
 * streamed, by the whole-text rule: at each delta the whole unsent text is rescanned.
 */
export function wholeTextParts(deltas: string[], limit: number | null, unit: SizeUnit): string[] {
  const out: string[] = [];
  let text = '';
  let sent = 0;
  for (const delta of deltas) {
    text += delta;
    const unsent = text.slice(sent);
    let ready = wholeTextParagraphs(unsent);
    const parts = splitText(unsent, limit, unit);
    if (parts.length > 1) {
      ready = Math.max(ready, unsent.length - parts[parts.length - 1].length);
    }
    if (ready > 0) {
      out.push(...splitText(unsent.slice(0, ready), limit, unit));
      sent += ready;
    }
  }
  const rest = text.slice(sent);
  if (/\S/.test(rest)) {
    out.push(...splitText(rest, limit, unit));
  }
  return out;
}
