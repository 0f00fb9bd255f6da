import * as http from 'node:http';
import { describeSocket, type HostHttp } from './http';

export interface SseEvent {
  id: string | null;
  event: string;
  data: string;
}

/** Incremental text/event-stream parser (comments and CRLF handled; no retry field). */
export class SseParser {
  private buffer = '';

  push(chunk: string): SseEvent[] {
    this.buffer += chunk;
    const events: SseEvent[] = [];
    let end: number;
    while ((end = this.blockEnd()) >= 0) {
      const block = this.buffer.slice(0, end);
      this.buffer = this.buffer.slice(end).replace(/^(\r?\n){2}/, '');
      const event = parseBlock(block);
      if (event) {
        events.push(event);
      }
    }
    return events;
  }

  private blockEnd(): number {
    const lf = this.buffer.indexOf('\n\n');
    const crlf = this.buffer.indexOf('\r\n\r\n');
    return lf < 0 ? crlf : crlf < 0 ? lf : Math.min(lf, crlf);
  }
}

function parseBlock(block: string): SseEvent | null {
  let id: string | null = null;
  let event = 'message';
  const data: string[] = [];
  for (const line of block.split(/\r?\n/)) {
    if (line === '' || line.startsWith(':')) {
      continue;
    }
    const colon = line.indexOf(':');
    const field = colon < 0 ? line : line.slice(0, colon);
    const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
    if (field === 'id') {
      id = value;
    } else if (field === 'event') {
      event = value;
    } else if (field === 'data') {
      data.push(value);
    }
  }
  return data.length === 0 ? null : { id, event, data: data.join('\n') };
}

/**
 * GETs an SSE stream and calls `onEvent` for each event as it arrives. Resolves when the server
 * ends the stream; rejects on a non-200 answer, a socket error or `timeoutMs` without the end.
 * A GET that fails on a reused keep-alive socket before any answer (the server closed the idle
 * socket as the request went out) is sent once more on a fresh one, as Node's docs advise.
 */
export function readSse(
  client: HostHttp,
  path: string,
  onEvent: (e: SseEvent) => void,
  timeoutMs: number,
  retryOnStaleSocket = true,
): Promise<void> {
  return new Promise((resolve, reject) => {
    let answered = false;
    const req = http.request(
      client.url(path),
      { method: 'GET', agent: client.sseAgent, headers: client.headers({ accept: 'text/event-stream' }) },
      (res) => {
        answered = true;
        res.setEncoding('utf8');
        if (res.statusCode !== 200) {
          let text = '';
          res.on('data', (chunk: string) => (text += chunk));
          res.on('end', () => reject(new Error(`GET ${path}: ${res.statusCode ?? 0} ${text.slice(0, 200)}`)));
          return;
        }
        const parser = new SseParser();
        res.on('data', (chunk: string) => {
          for (const e of parser.push(chunk)) {
            onEvent(e);
          }
        });
        res.on('error', (e) => reject(new Error(`GET ${path}: ${e.message} while streaming`)));
        res.on('end', () => {
          clearTimeout(timer);
          resolve();
        });
      },
    );
    const timer = setTimeout(
      () => req.destroy(new Error(`GET ${path}: stream not ended after ${timeoutMs} ms`)),
      timeoutMs,
    );
    req.on('error', (e) => {
      clearTimeout(timer);
      if (!answered && req.reusedSocket && retryOnStaleSocket && isStaleSocketError(e)) {
        readSse(client, path, onEvent, timeoutMs, false).then(resolve, reject);
        return;
      }
      reject(new Error(`GET ${path}: ${e.message}${describeSocket(req)}`));
    });
    req.end();
  });
}

function isStaleSocketError(e: Error): boolean {
  const code = (e as NodeJS.ErrnoException).code;
  return code === 'ECONNRESET' || code === 'EPIPE' || e.message === 'socket hang up';
}
