import * as http from 'node:http';

const IDLE_SOCKET_MS = 2_000;

/** A JSON-over-HTTP client for the host API: one keep-alive agent, bearer auth. */
export class HostHttp {
  /** Keep-alive agent for the short JSON requests (POST /v1/events, admin calls). */
  readonly agent: http.Agent;
  /** Separate keep-alive agent for the SSE streams, so they never queue behind or block the POSTs. */
  readonly sseAgent: http.Agent;

  constructor(
    readonly baseUrl: string,
    private readonly token: string,
  ) {
    // Idle keep-alive sockets are dropped after 2 s, before the server's keep-alive timeout (5 s
    // in Node) closes them: otherwise a request after an idle spell can race the server's close
    // and fail with ECONNRESET on a reused socket. (Node also honours a shorter `Keep-Alive:
    // timeout=N` hint, but only when the agent has a timeout.) Requests set their own timeouts.
    this.agent = new http.Agent({ keepAlive: true, maxSockets: 256, timeout: IDLE_SOCKET_MS });
    // The streaming level holds 1,000 SSE streams open at once (100 runs × 10 readers).
    this.sseAgent = new http.Agent({ keepAlive: true, maxSockets: 2048, timeout: IDLE_SOCKET_MS });
  }

  headers(extra: Record<string, string> = {}): Record<string, string> {
    return { authorization: `Bearer ${this.token}`, ...extra };
  }

  url(path: string): URL {
    return new URL(path, this.baseUrl);
  }

  /** Sends a JSON request; resolves with the status and the parsed body (null when empty). */
  json(method: string, path: string, body?: unknown, timeoutMs = 15_000): Promise<{ status: number; body: unknown }> {
    const payload = body === undefined ? undefined : JSON.stringify(body);
    const headers = this.headers(
      payload === undefined
        ? {}
        : { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(payload)) },
    );
    return new Promise((resolve, reject) => {
      const req = http.request(this.url(path), { method, agent: this.agent, headers }, (res) => {
        res.setEncoding('utf8');
        let text = '';
        res.on('data', (chunk: string) => (text += chunk));
        res.on('error', reject);
        res.on('end', () => {
          try {
            resolve({ status: res.statusCode ?? 0, body: text === '' ? null : JSON.parse(text) });
          } catch {
            reject(
              new Error(
                `${method} ${path}: ${res.statusCode ?? 0} with a body that is not JSON: ${text.slice(0, 200)}`,
              ),
            );
          }
        });
      });
      req.setTimeout(timeoutMs, () => req.destroy(new Error(`no answer in ${timeoutMs} ms`)));
      req.on('error', (e) => reject(new Error(`${method} ${path}: ${e.message}${describeSocket(req)}`)));
      req.end(payload);
    });
  }

  /** Like json(), but throws unless the status is `expected`. */
  async expect(expected: number, method: string, path: string, body?: unknown): Promise<unknown> {
    const res = await this.json(method, path, body);
    if (res.status !== expected) {
      throw new Error(`${method} ${path}: expected ${expected}, got ${res.status} ${JSON.stringify(res.body)}`);
    }
    return res.body;
  }

  close(): void {
    this.agent.destroy();
    this.sseAgent.destroy();
  }
}

/** ", on a reused keep-alive socket" when it was one: tells a keep-alive race from a server reset. */
export function describeSocket(req: http.ClientRequest): string {
  return req.reusedSocket ? ' (on a reused keep-alive socket)' : ' (on a new connection)';
}
