import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import puppeteer, { type Browser, type Page } from 'puppeteer-core';
import { Host, TestDatabase, freePort, startDemoRunner, type Proc } from './harness';

jest.setTimeout(120_000);

/** Debian's chromium (scripts/browser-test.sh installs it); CHROMIUM_PATH overrides. */
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const TEXT = 'a page follows this run from another origin';

interface Followed {
  frames: { id: string; event: string; data: { type: string; sequence: number; data: any } }[];
  onmessage: number;
  /** EventSource.readyState after the end: 2 (CLOSED) once the resume got 204. */
  readyState: number;
  errors: number;
}

/**
 * A page on another origin follows runs in headless Chromium, as a web console would: it calls the
 * API with fetch (CORS preflights included), mints a stream token, follows one run with EventSource
 * and another with fetch streaming.
 */
describe('browser: a page in headless Chromium follows runs (EventSource + stream token, fetch streaming)', () => {
  const db = new TestDatabase();
  let host: Host;
  let runner: Proc;
  let pageServer: http.Server;
  let browser: Browser;
  let page: Page;
  let key: string;
  let pagePort: number;

  beforeAll(async () => {
    // The page's own origin: another port is another origin.
    pagePort = await freePort();
    pageServer = http.createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
      res.end('<!doctype html><title>console</title><p>runner host console</p>');
    });
    await new Promise<void>((resolve) => pageServer.listen(pagePort, '127.0.0.1', resolve));
    const origin = `http://127.0.0.1:${(pageServer.address() as AddressInfo).port}`;
    host = await new Host(db, { CORS_ALLOWED_ORIGINS: origin }).start();
    let runnerId: string;
    ({ runner, runnerId } = await startDemoRunner(host));
    const agent = { agent_id: 'echo', runner_id: runnerId, runner_config: { mode: 'echo', chunk_delay_ms: 80 } };
    expect((await host.api('POST', '/v1/admin/agents', agent)).status).toBe(201);
    key = (await host.api('POST', '/v1/admin/api-keys', { name: 'console', role: 'platform' })).body.key;
    browser = await puppeteer.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox'] });
    page = await browser.newPage();
    await page.goto(`${origin}/`);
  });

  afterAll(async () => {
    await browser?.close();
    await runner?.stop();
    await host?.stop();
    await new Promise((resolve) => pageServer?.close(resolve));
    await db.drop();
  });

  /** In the page: POST /v1/events with the key (a preflighted cross-origin request); the run id. */
  const startRun = (conversation: string) =>
    page.evaluate(
      async (api: string, apiKey: string, text: string, conversationId: string) => {
        const res = await fetch(`${api}/v1/events`, {
          method: 'POST',
          headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
          body: JSON.stringify({
            agent_id: 'echo',
            event: { event_type: 'message.received', source: 'api' },
            conversation: { conversation_id: conversationId },
            input: { text },
          }),
        });
        return ((await res.json()) as { run_id: string }).run_id;
      },
      host.http,
      key,
      TEXT,
      conversation,
    );

  it('follows a live run with EventSource and a stream token; the resume after the end gets 204 and it stops', async () => {
    const runId = await startRun('page-es');
    const followed = await page.evaluate(
      async (api: string, apiKey: string, run: string): Promise<Followed> => {
        const minted = await fetch(`${api}/v1/runs/${run}/stream-tokens`, {
          method: 'POST',
          headers: { authorization: `Bearer ${apiKey}` },
        });
        const { events_url } = (await minted.json()) as { events_url: string };
        const source = new EventSource(`${api}${events_url}`);
        const out: Followed = { frames: [], onmessage: 0, readyState: -1, errors: 0 };
        source.onmessage = () => out.onmessage++;
        return new Promise<Followed>((resolve) => {
          for (const type of ['message.delta', 'message.completed', 'run.completed', 'run.failed']) {
            source.addEventListener(type, (e) => {
              const m = e as unknown as { lastEventId: string; type: string; data: string };
              out.frames.push({ id: m.lastEventId, event: m.type, data: JSON.parse(m.data) });
            });
          }
          // The stream ends after the terminal result (an error, then a reconnect with Last-Event-ID);
          // the reconnect gets 204 and EventSource closes for good (readyState 2).
          source.onerror = () => {
            out.errors++;
            if (source.readyState === EventSource.CLOSED) {
              out.readyState = source.readyState;
              resolve(out);
            }
          };
        });
      },
      host.http,
      key,
      runId,
    );
    const types = followed.frames.map((f) => f.event);
    expect(types.filter((t) => t === 'message.delta').length).toBeGreaterThan(3);
    expect(types.slice(-2)).toEqual(['message.completed', 'run.completed']);
    expect(followed.frames.map((f) => Number(f.id))).toEqual(followed.frames.map((_, i) => i + 1));
    expect(followed.frames.every((f) => f.data.type === f.event && f.data.sequence === Number(f.id))).toBe(true);
    expect(followed.frames.at(-2)!.data.data.message.content).toBe(TEXT);
    expect(followed.onmessage).toBe(0); // frames are named by result type
    // Two errors: the end of the stream (EventSource reconnects with Last-Event-ID), then the 204 (it
    // closes). No frame came twice: the ids above are 1..n.
    expect(followed).toMatchObject({ readyState: 2, errors: 2 });
    // The token travelled in URLs and never reached the log.
    expect(host.proc.logs()).not.toMatch(/rhst_[A-Za-z0-9_-]{8}/);
  });

  it('follows a live run with fetch streaming and the Authorization header', async () => {
    const runId = await startRun('page-fetch');
    const events = await page.evaluate(
      async (api: string, apiKey: string, run: string) => {
        const res = await fetch(`${api}/v1/runs/${run}/events`, { headers: { authorization: `Bearer ${apiKey}` } });
        const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
        const seen: { event: string; chunks: number }[] = [];
        let buffer = '';
        let reads = 0;
        for (;;) {
          const { value, done } = await reader.read();
          if (done) {
            break;
          }
          reads++;
          buffer += value;
          let end: number;
          while ((end = buffer.indexOf('\n\n')) >= 0) {
            const block = buffer.slice(0, end);
            buffer = buffer.slice(end + 2);
            const event = /^event: (.*)$/m.exec(block)?.[1];
            if (event) {
              seen.push({ event, chunks: reads });
            }
          }
        }
        return { status: res.status, type: res.headers.get('content-type'), seen, reads };
      },
      host.http,
      key,
      runId,
    );
    expect(events.status).toBe(200);
    expect(events.type).toContain('text/event-stream');
    expect(events.seen.map((e) => e.event).slice(-2)).toEqual(['message.completed', 'run.completed']);
    // Live: the frames arrived over several reads, not as one body at the end.
    expect(events.reads).toBeGreaterThan(1);
  });

  it('is refused by the browser on an origin that is not allowed (localhost is not 127.0.0.1)', async () => {
    const other = await browser.newPage();
    await other.goto(`http://localhost:${pagePort}/`);
    const outcome = await other.evaluate(async (api: string) => {
      try {
        await fetch(`${api}/v1/runs`, { headers: { authorization: 'Bearer x' } });
        return 'answered';
      } catch (e) {
        return (e as Error).name;
      }
    }, host.http);
    expect(outcome).toBe('TypeError');
    await other.close();
  });
});
