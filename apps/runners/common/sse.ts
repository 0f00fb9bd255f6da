import { bodyChunks } from './body-chunks';

/*
 * A server-sent-events reader for the reference runners' HTTP targets
 * (docs/reference-runners.md): yields one `{event, data}` per event block of a fetch body, `data`
 * being the block's data lines joined with "\n". Comment lines (`:`) are skipped.
 */

export interface SseMessage {
  /** The `event:` field; 'message' when absent (as in EventSource). */
  event: string;
  data: string;
}

export async function* sseMessages(body: ReadableStream<Uint8Array>): AsyncGenerator<SseMessage> {
  const decoder = new TextDecoder();
  let buffer = '';
  for await (const chunk of bodyChunks(body)) {
    buffer += decoder.decode(chunk, { stream: true }).replace(/\r\n?/g, '\n');
    let end: number;
    while ((end = buffer.indexOf('\n\n')) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const message = parseBlock(block);
      if (message) {
        yield message;
      }
    }
  }
  const last = parseBlock(buffer + decoder.decode());
  if (last) {
    yield last;
  }
}

function parseBlock(block: string): SseMessage | null {
  let event = 'message';
  const data: string[] = [];
  for (const line of block.split('\n')) {
    if (line === '' || line.startsWith(':')) {
      continue;
    }
    const colon = line.indexOf(':');
    const field = colon < 0 ? line : line.slice(0, colon);
    const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
    if (field === 'event') {
      event = value;
    } else if (field === 'data') {
      data.push(value);
    }
  }
  return data.length > 0 || event !== 'message' ? { event, data: data.join('\n') } : null;
}
