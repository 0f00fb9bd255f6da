import * as http from 'node:http';
import * as https from 'node:https';
import { parseSse, type SseEvent } from './harness';

/**
 * An SSE reader on its own socket that can stop reading: `pause()` leaves the response unread, so
 * the host's writes back up through the TCP window exactly as with a stalled client.
 */
export class RawSseReader {
  status = 0;
  body = '';
  private res: http.IncomingMessage | null = null;
  private readonly closed: Promise<void>;
  private markClosed!: () => void;

  private constructor(readonly req: http.ClientRequest) {
    this.closed = new Promise((resolve) => (this.markClosed = resolve));
    req.on('error', () => this.markClosed());
    req.on('close', () => this.markClosed());
  }

  /** Opens the stream and waits for the status line; the body is left unread (paused). */
  static async open(
    base: string,
    path: string,
    key: string,
    headers: Record<string, string> = {},
    ca?: Buffer,
  ): Promise<RawSseReader> {
    const url = new URL(path, base);
    const client = url.protocol === 'https:' ? https : http;
    const req = client.get(url, { agent: false, ca, headers: { authorization: `Bearer ${key}`, ...headers } });
    const reader = new RawSseReader(req);
    await new Promise<void>((resolve, reject) => {
      req.once('response', (res) => {
        reader.res = res;
        reader.status = res.statusCode ?? 0;
        res.pause();
        res.on('close', () => reader.markClosed());
        resolve();
      });
      req.once('error', reject);
    });
    return reader;
  }

  /** Reads everything the host sent until the connection ends (normally or cut). */
  async readToEnd(): Promise<SseEvent[]> {
    const res = this.res!;
    res.setEncoding('utf8');
    res.on('data', (d: string) => (this.body += d));
    res.on('error', () => undefined); // a cut connection ends the body early; that is what is tested
    res.resume();
    await this.closed;
    return parseSse(completeFrames(this.body));
  }

  close(): void {
    this.req.destroy();
  }
}

/** The frames of a body that may end mid-frame (a cut stream): everything up to the last blank line. */
export function completeFrames(body: string): string {
  const end = body.lastIndexOf('\n\n');
  return end < 0 ? '' : body.slice(0, end + 2);
}

/** Resident set size of a process in bytes (Linux). */
export async function rssOf(pid: number): Promise<number> {
  const { readFile } = await import('node:fs/promises');
  const kb = /VmRSS:\s+(\d+)/.exec(await readFile(`/proc/${pid}/status`, 'utf8'))?.[1];
  return Number(kb) * 1024;
}
