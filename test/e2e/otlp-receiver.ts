import * as http from 'node:http';
import type { AddressInfo } from 'node:net';

/*
 * A small OTLP/HTTP trace receiver for the tracing e2e test (the OpenTelemetry Collector is not
 * packaged here): takes POST /v1/traces in the OTLP/JSON encoding the host's exporter sends and
 * keeps every span, flattened.
 */

export interface ReceivedSpan {
  traceId: string;
  spanId: string;
  parentSpanId: string;
  name: string;
  kind: number;
  attributes: Record<string, unknown>;
  events: string[];
  /** Span links: the linked span's ids and the link's attributes. */
  links: { traceId: string; spanId: string; attributes: Record<string, unknown> }[];
  status: number;
  resource: Record<string, unknown>;
}

/** Hex ids as sent (OTLP/JSON), or base64 (proto3 JSON mapping) turned to hex. */
function hexId(id: unknown): string {
  const s = typeof id === 'string' ? id : '';
  return /^[0-9a-f]*$/i.test(s) && (s.length === 32 || s.length === 16 || s.length === 0)
    ? s.toLowerCase()
    : Buffer.from(s, 'base64').toString('hex');
}

function attributesOf(list: unknown): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const a of (list as { key: string; value: Record<string, unknown> }[] | undefined) ?? []) {
    const v = a.value;
    out[a.key] = v.stringValue ?? (v.intValue !== undefined ? Number(v.intValue) : (v.doubleValue ?? v.boolValue));
  }
  return out;
}

export class OtlpReceiver {
  readonly spans: ReceivedSpan[] = [];
  readonly contentTypes = new Set<string>();
  private readonly server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (req.method !== 'POST' || req.url !== '/v1/traces') {
        res.writeHead(404).end();
        return;
      }
      this.contentTypes.add(String(req.headers['content-type']));
      try {
        this.take(JSON.parse(Buffer.concat(chunks).toString('utf8')));
        res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
      } catch {
        res.writeHead(400).end();
      }
    });
  });

  async start(): Promise<this> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    return this;
  }

  get endpoint(): string {
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/v1/traces`;
  }

  close(): Promise<void> {
    this.server.closeAllConnections();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }

  ofTrace(traceId: string): ReceivedSpan[] {
    return this.spans.filter((s) => s.traceId === traceId);
  }

  private take(body: any): void {
    for (const rs of body.resourceSpans ?? []) {
      const resource = attributesOf(rs.resource?.attributes);
      for (const ss of rs.scopeSpans ?? []) {
        for (const s of ss.spans ?? []) {
          this.spans.push({
            traceId: hexId(s.traceId),
            spanId: hexId(s.spanId),
            parentSpanId: hexId(s.parentSpanId ?? ''),
            name: s.name,
            kind: s.kind,
            attributes: attributesOf(s.attributes),
            events: (s.events ?? []).map((e: { name: string }) => e.name),
            links: (s.links ?? []).map((l: { traceId: string; spanId: string; attributes?: unknown }) => ({
              traceId: hexId(l.traceId),
              spanId: hexId(l.spanId),
              attributes: attributesOf(l.attributes),
            })),
            status: s.status?.code ?? 0,
            resource,
          });
        }
      }
    }
  }
}
