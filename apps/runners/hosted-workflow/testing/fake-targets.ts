import { randomUUID } from 'node:crypto';
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';

/*
 * Scripted fakes of the hosted-workflow runner's targets, for its unit tests and the e2e test
 * (docs/reference-runners.md): real HTTP on loopback, the targets' published wire formats.
 *
 * FakeDify speaks Dify's app API: `POST /v1/chat-messages` (Bearer app key; `response_mode:
 * streaming` answers `text/event-stream` with `data: {"event": "message", …}` events, one per
 * scripted piece, then `message_end` with `metadata.usage`, or an `error` event; an unknown
 * `conversation_id` is a 404 `{code: "not_found", message: "Conversation Not Exists.", status:
 * 404}`), and `POST /v1/chat-messages/:task_id/stop`.
 *
 * FakeWebhook answers `POST /webhook/:id` with a scripted JSON body, or with n8n's streamed
 * response (newline-delimited `{"type": "begin" | "item" | "end", …}`).
 */

export interface Recorded {
  method: string;
  path: string;
  headers: Record<string, string>;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- the parsed JSON body, read by the tests
  body: any;
}

abstract class FakeServer {
  readonly requests: Recorded[] = [];
  private server!: http.Server;

  async start(): Promise<this> {
    this.server = http.createServer((req, res) => {
      void this.receive(req, res).catch(() => res.destroy());
    });
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    return this;
  }

  get url(): string {
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private async receive(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const c of req) {
      chunks.push(c as Buffer);
    }
    const text = Buffer.concat(chunks).toString('utf8');
    let body: unknown = text;
    try {
      body = text ? JSON.parse(text) : null;
    } catch {
      // kept as text
    }
    const headers = Object.fromEntries(Object.entries(req.headers).map(([k, v]) => [k, String(v)]));
    const recorded = { method: req.method ?? 'GET', path: (req.url ?? '/').split('?')[0], headers, body };
    this.requests.push(recorded);
    await this.handle(recorded, res);
  }

  protected abstract handle(req: Recorded, res: http.ServerResponse): Promise<void>;
}

function json(res: http.ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
}

export type DifyScript =
  | { answer: string[]; usage?: { prompt_tokens: number; completion_tokens: number; total_tokens: number } }
  /** An `error` event after the pieces (Dify's in-stream failure). */
  | { answer: string[]; error: { status: number; code: string; message: string } }
  /** Streams the pieces, then waits until the task is stopped. */
  | { answer: string[]; hang: true };

export class FakeDify extends FakeServer {
  readonly conversations = new Map<string, string[]>();
  readonly stopped: string[] = [];
  private readonly scripts: DifyScript[] = [];
  private readonly waiting = new Map<string, () => void>();

  constructor(readonly apiKey: string) {
    super();
  }

  /** `http://127.0.0.1:<port>/v1`, the base URL a binding names. */
  get baseUrl(): string {
    return `${this.url}/v1`;
  }

  script(...scripts: DifyScript[]): this {
    this.scripts.push(...scripts);
    return this;
  }

  /** The chat-messages requests received (not the stops). */
  get chats(): Recorded[] {
    return this.requests.filter((r) => r.path === '/v1/chat-messages');
  }

  protected async handle(req: Recorded, res: http.ServerResponse): Promise<void> {
    if (req.headers.authorization !== `Bearer ${this.apiKey}`) {
      return json(res, 401, { code: 'unauthorized', message: 'Access token is invalid', status: 401 });
    }
    const stop = /^\/v1\/chat-messages\/([^/]+)\/stop$/.exec(req.path);
    if (req.method === 'POST' && stop) {
      this.stopped.push(stop[1]);
      this.waiting.get(stop[1])?.();
      return json(res, 200, { result: 'success' });
    }
    if (req.method !== 'POST' || req.path !== '/v1/chat-messages') {
      return json(res, 404, { code: 'not_found', message: 'Not Found', status: 404 });
    }
    const body = req.body as { query?: unknown; response_mode?: unknown; conversation_id?: unknown; user?: unknown };
    if (typeof body?.query !== 'string' || typeof body.user !== 'string' || body.response_mode !== 'streaming') {
      return json(res, 400, {
        code: 'invalid_param',
        message: 'query, user and response_mode are required',
        status: 400,
      });
    }
    let conversationId = typeof body.conversation_id === 'string' ? body.conversation_id : '';
    if (conversationId && !this.conversations.has(conversationId)) {
      return json(res, 404, { code: 'not_found', message: 'Conversation Not Exists.', status: 404 });
    }
    if (!conversationId) {
      conversationId = randomUUID();
      this.conversations.set(conversationId, []);
    }
    this.conversations.get(conversationId)!.push(body.query);
    const script = this.scripts.shift() ?? { answer: ['ok'] };
    const task_id = randomUUID();
    const message_id = randomUUID();
    const base = { task_id, message_id, conversation_id: conversationId, created_at: Math.floor(Date.now() / 1000) };
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    const send = (data: object) => res.write(`data: ${JSON.stringify(data)}\n\n`);
    res.write('event: ping\n\n');
    for (const piece of script.answer) {
      send({ event: 'message', ...base, id: message_id, answer: piece });
    }
    if ('hang' in script) {
      await new Promise<void>((resolve) => {
        this.waiting.set(task_id, resolve);
        res.once('close', resolve);
      });
      return void res.end();
    }
    if ('error' in script) {
      send({ event: 'error', task_id, message_id, ...script.error });
      return void res.end();
    }
    const usage = script.usage ?? { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 };
    send({
      event: 'message_end',
      ...base,
      id: message_id,
      metadata: { usage: { ...usage, total_price: '0.0001', currency: 'USD', latency: 0.2 }, retriever_resources: [] },
    });
    res.end();
  }
}

export type WebhookScript = { json: unknown; status?: number } | { stream: string[] } | { text: string };

export class FakeWebhook extends FakeServer {
  private readonly scripts: WebhookScript[] = [];

  script(...scripts: WebhookScript[]): this {
    this.scripts.push(...scripts);
    return this;
  }

  webhookUrl(id = 'chat'): string {
    return `${this.url}/webhook/${id}`;
  }

  protected async handle(req: Recorded, res: http.ServerResponse): Promise<void> {
    if (req.method !== 'POST' || !req.path.startsWith('/webhook/')) {
      return json(res, 404, { code: 404, message: 'The requested webhook is not registered.' });
    }
    const script = this.scripts.shift() ?? { json: { output: 'ok' } };
    if ('json' in script) {
      return json(res, script.status ?? 200, script.json);
    }
    if ('text' in script) {
      return void res.writeHead(200, { 'content-type': 'text/plain' }).end(script.text);
    }
    res.writeHead(200, { 'content-type': 'application/json; charset=utf-8', 'transfer-encoding': 'chunked' });
    const meta = { nodeId: 'agent', nodeName: 'AI Agent', timestamp: Date.now() };
    res.write(`${JSON.stringify({ type: 'begin', metadata: meta })}\n`);
    for (const content of script.stream) {
      res.write(`${JSON.stringify({ type: 'item', content, metadata: meta })}\n`);
      await new Promise((r) => setImmediate(r));
    }
    res.end(`${JSON.stringify({ type: 'end', metadata: meta })}\n`);
  }
}
