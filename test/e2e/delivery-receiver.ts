import * as http from 'node:http';
import type { Socket } from 'node:net';
import { verifySignature } from '@libs/delivery';

export interface ReceivedOp {
  delivery_id: string;
  run_id: string;
  agent_id: string;
  sequence: number;
  op: string;
  idempotency_key: string;
  target_delivery_id: string | null;
  payload: Record<string, any>;
}

export interface Received {
  op: ReceivedOp;
  raw: string;
  headers: http.IncomingHttpHeaders;
  signed: boolean;
  /** What the receiver answered: a status, or 'hang' (never answered: the host times out). */
  answer: number | 'hang';
}

export type ReceiverMode = 'ok' | 'fail' | 'hang';

/**
 * A real local HTTP webhook receiver for the delivery e2e tests: answers 200, 500 or never, as
 * told; can go down (port closed, connections refused) and come back on the same port.
 */
export class WebhookReceiver {
  mode: ReceiverMode = 'ok';
  readonly received: Received[] = [];
  port = 0;
  private server?: http.Server;
  private readonly sockets = new Set<Socket>();

  constructor(private readonly secret: string) {}

  get url(): string {
    return `http://127.0.0.1:${this.port}/hook`;
  }

  async start(): Promise<this> {
    const server = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const raw = Buffer.concat(chunks).toString('utf8');
        const ts = String(req.headers['x-runnerhost-timestamp'] ?? '');
        const sig = String(req.headers['x-runnerhost-signature'] ?? '');
        const answer = this.mode === 'ok' ? 200 : this.mode === 'fail' ? 500 : 'hang';
        this.received.push({
          op: JSON.parse(raw) as ReceivedOp,
          raw,
          headers: req.headers,
          signed: verifySignature(this.secret, ts, raw, sig),
          answer,
        });
        if (answer !== 'hang') {
          res.writeHead(answer, { 'content-type': 'text/plain' }).end(answer === 200 ? 'ok' : 'down for maintenance');
        }
      });
    });
    server.on('connection', (s) => {
      this.sockets.add(s);
      s.on('close', () => this.sockets.delete(s));
    });
    await new Promise<void>((resolve) => server.listen(this.port, '127.0.0.1', resolve));
    this.port = (server.address() as { port: number }).port;
    this.server = server;
    return this;
  }

  /** Down: the port closes, open connections are cut (the host sees refused connections). */
  async stop(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    for (const s of this.sockets) {
      s.destroy();
    }
    if (server) {
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  }

  /** The ops this receiver acknowledged (2xx), in arrival order. */
  acked(runId?: string): ReceivedOp[] {
    return this.received.filter((r) => r.answer === 200 && (!runId || r.op.run_id === runId)).map((r) => r.op);
  }

  ofRun(runId: string): Received[] {
    return this.received.filter((r) => r.op.run_id === runId);
  }
}
