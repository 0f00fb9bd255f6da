import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { errorBody, type Script, type ScriptedCompletion } from './openai-scripts';
import { completionChunks, completionJson, scoreDocuments, sse, type ChatRequestBody } from './openai-wire';

export interface RecordedRequest {
  method: string;
  path: string;
  /** Lower-case header names. */
  headers: Record<string, string>;
  body: any;
  at: number;
  /** performance.now() when the request arrived, and when its answer was fully written (benchmarks). */
  received_ms: number;
  answered_ms?: number;
}

type Route = 'chat' | 'rerank';

/**
 * A scripted OpenAI-compatible HTTP server (node:http) for tests and benchmarks: the real SDK talks
 * to it over real HTTP. `POST …/chat/completions` and `POST …/rerank` (any path prefix, e.g.
 * `/v1`) answer the next queued script of their route, or the default when the queue is empty;
 * every request is recorded.
 */
export class ScriptedOpenAIServer {
  readonly requests: RecordedRequest[] = [];
  /** Answer of a chat request when no script is queued. */
  defaultCompletion: ScriptedCompletion = { content: 'ok' };
  private readonly queues: Record<Route, Script[]> = { chat: [], rerank: [] };

  private constructor(private readonly server: http.Server) {}

  static async start(port = 0): Promise<ScriptedOpenAIServer> {
    const server = http.createServer();
    server.keepAliveTimeout = 30_000;
    const self = new ScriptedOpenAIServer(server);
    server.on('request', (req: http.IncomingMessage, res: http.ServerResponse) => {
      void self.handle(req, res).catch(() => res.destroy());
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, '127.0.0.1', () => resolve());
    });
    return self;
  }

  /** `http://127.0.0.1:<port>` */
  get url(): string {
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  /** The base URL to register a model with: `<url>/v1`. */
  get baseUrl(): string {
    return `${this.url}/v1`;
  }

  /** Queues scripts for chat completions, answered in order. */
  chat(...scripts: Script[]): this {
    this.queues.chat.push(...scripts);
    return this;
  }

  /** Queues scripts for `/rerank`, answered in order. */
  rerank(...scripts: Script[]): this {
    this.queues.rerank.push(...scripts);
    return this;
  }

  pending(route: Route = 'chat'): number {
    return this.queues[route].length;
  }

  /** Forgets queued scripts and recorded requests. */
  reset(): void {
    this.queues.chat.length = 0;
    this.queues.rerank.length = 0;
    this.requests.length = 0;
  }

  last(): RecordedRequest | undefined {
    return this.requests.at(-1);
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private async handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const received_ms = performance.now();
    const chunks: Buffer[] = [];
    for await (const c of req) {
      chunks.push(c as Buffer);
    }
    const text = Buffer.concat(chunks).toString('utf8');
    let body: any = null;
    try {
      body = text ? JSON.parse(text) : null;
    } catch {
      body = text;
    }
    const path = (req.url ?? '/').split('?')[0];
    const headers = Object.fromEntries(Object.entries(req.headers).map(([k, v]) => [k, String(v)]));
    const recorded: RecordedRequest = { method: req.method ?? 'GET', path, headers, body, at: Date.now(), received_ms };
    this.requests.push(recorded);
    res.once('finish', () => (recorded.answered_ms = performance.now()));
    const route: Route | null =
      req.method === 'POST' && path.endsWith('/chat/completions')
        ? 'chat'
        : req.method === 'POST' && path.endsWith('/rerank')
          ? 'rerank'
          : null;
    if (!route) {
      return json(
        res,
        404,
        errorBody(`Unknown request URL: ${req.method} ${path}`, 'invalid_request_error', 'unknown_url'),
      );
    }
    const script =
      this.queues[route].shift() ??
      (route === 'chat' ? { type: 'completion', completion: this.defaultCompletion } : { type: 'rerank' });
    return route === 'chat'
      ? this.answerChat(script, body as ChatRequestBody, req, res)
      : this.answerRerank(script, body, res);
  }

  private async answerChat(
    script: Script,
    body: ChatRequestBody,
    req: http.IncomingMessage,
    res: http.ServerResponse,
  ): Promise<void> {
    const stream = body?.stream === true;
    switch (script.type) {
      case 'error':
        return json(res, script.status, script.body, script.headers);
      case 'hang':
        await new Promise<void>((resolve) => req.socket.once('close', () => resolve()));
        return;
      case 'rerank':
        return json(res, 500, errorBody('a rerank script was queued for a chat request', 'server_error', null));
      case 'malformed':
        return malformed(script.mode, stream, body, res);
      case 'completion':
        if (script.delay_ms) {
          await sleep(script.delay_ms);
        }
        if (!stream) {
          return json(res, 200, completionJson(script.completion, body));
        }
        res.writeHead(200, {
          'content-type': 'text/event-stream',
          'cache-control': 'no-cache',
          connection: 'keep-alive',
        });
        for (const c of completionChunks(script.completion, body)) {
          if (res.destroyed) {
            return;
          }
          res.write(sse(c));
          if (script.chunk_delay_ms) {
            await sleep(script.chunk_delay_ms);
          }
        }
        res.end(sse('[DONE]'));
        return;
    }
  }

  private answerRerank(script: Script, body: any, res: http.ServerResponse): void {
    if (script.type === 'error') {
      return json(res, script.status, script.body, script.headers);
    }
    if (script.type !== 'rerank') {
      return json(res, 500, errorBody('a chat script was queued for a rerank request', 'server_error', null));
    }
    if (script.raw !== undefined) {
      return json(res, 200, script.raw);
    }
    const documents: string[] = Array.isArray(body?.documents) ? body.documents : [];
    const scored = script.results ?? scoreDocuments(String(body?.query ?? ''), documents);
    const sorted = [...scored].sort((a, b) => b.relevance_score - a.relevance_score);
    const topN = typeof body?.top_n === 'number' ? body.top_n : sorted.length;
    const usage = script.usage === undefined ? { total_tokens: documents.join(' ').split(/\s+/).length } : script.usage;
    return json(res, 200, { id: 'rerank-scripted', results: sorted.slice(0, topN), ...(usage ? { usage } : {}) });
  }
}

function json(res: http.ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), ...headers });
  res.end(text);
}

function malformed(mode: string, stream: boolean, body: ChatRequestBody, res: http.ServerResponse): void {
  if (!stream) {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end('{"id": "chatcmpl-broken", "choices": [');
    return;
  }
  res.writeHead(200, { 'content-type': 'text/event-stream' });
  // The role chunk and two content deltas, then the fault.
  for (const c of completionChunks({ deltas: ['partial ', 'answer'] }, body).slice(0, 3)) {
    res.write(sse(c));
  }
  switch (mode) {
    case 'bad_json':
      res.write('data: {"id": "chatcmpl-broken", "choices": [\n\n');
      res.end(sse('[DONE]'));
      return;
    case 'no_finish':
      res.end();
      return;
    case 'error_event':
      res.write(sse(errorBody('The server had an error while processing your request.', 'server_error', null)));
      res.end();
      return;
    default:
      // Let the chunks reach the client first, then drop the connection.
      setTimeout(() => res.socket?.destroy(), 30);
  }
}
