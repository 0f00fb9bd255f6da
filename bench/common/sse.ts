import * as http from 'node:http';
import { describeSocket, type HostHttp } from './http';

export interface SseEvent {
  id: string | null;
  event: string;
  data: string;
}

/**
 * Incremental text/event-stream parser (comments, LF and CRLF line ends — a lone CR is not a line
 * end here, as the host never sends one; no retry field). Linear in the text it is given: each line
 * is read once, whatever the chunking (the block-at-a-time parser before it searched the rest of
 * its buffer for the next blank line at every event: ≈ 1 µs per event of a replayed run,
 * docs/benchmarks.md round 12).
 */
export class SseParser {
  /** The start of a line that has not ended yet. */
  private pending = '';
  private id: string | null = null;
  private event = 'message';
  private data: string[] = [];

  push(chunk: string): SseEvent[] {
    const events: SseEvent[] = [];
    let pos = 0;
    let lf: number;
    while ((lf = chunk.indexOf('\n', pos)) >= 0) {
      let line = chunk.slice(pos, lf);
      if (this.pending !== '') {
        line = this.pending + line;
        this.pending = '';
      }
      pos = lf + 1;
      this.line(line.charCodeAt(line.length - 1) === CR ? line.slice(0, -1) : line, events);
    }
    if (pos < chunk.length) {
      this.pending += chunk.slice(pos);
    }
    return events;
  }

  private line(line: string, events: SseEvent[]): void {
    if (line === '') {
      if (this.data.length > 0) {
        events.push({ id: this.id, event: this.event, data: this.data.join('\n') });
      }
      this.id = null;
      this.event = 'message';
      this.data = [];
      return;
    }
    if (line.charCodeAt(0) === COLON) {
      return;
    }
    const colon = line.indexOf(':');
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? '' : line.slice(colon + 1);
    if (value.charCodeAt(0) === SPACE) {
      value = value.slice(1);
    }
    if (field === 'id') {
      this.id = value;
    } else if (field === 'event') {
      this.event = value;
    } else if (field === 'data') {
      this.data.push(value);
    }
  }
}

const CR = 13;
const COLON = 58;
const SPACE = 32;

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
