import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { HostMetrics } from './metrics';

/**
 * The metrics listener: `GET /metrics` in the Prometheus text format on a port of its own
 * (METRICS_PORT), without authentication — the port is meant for an operator-only network, the
 * way Prometheus scrapes exporters (docs/observability.md explains the choice). Nothing else is served.
 */
export class MetricsServer {
  private readonly server: http.Server;

  constructor(private readonly metrics: HostMetrics) {
    this.server = http.createServer((req, res) => void this.answer(req, res));
    this.server.keepAliveTimeout = 65_000;
  }

  listen(port: number, host: string): Promise<number> {
    return new Promise((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(port, host, () => {
        this.server.off('error', reject);
        resolve((this.server.address() as AddressInfo).port);
      });
    });
  }

  close(): Promise<void> {
    return new Promise((resolve) => {
      this.server.closeAllConnections();
      this.server.close(() => resolve());
    });
  }

  private async answer(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const path = (req.url ?? '/').split('?')[0];
    if (path !== '/metrics') {
      res
        .writeHead(404, { 'content-type': 'text/plain; charset=utf-8' })
        .end('not found: only GET /metrics is served here\n');
      return;
    }
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res
        .writeHead(405, { allow: 'GET, HEAD', 'content-type': 'text/plain; charset=utf-8' })
        .end('method not allowed\n');
      return;
    }
    try {
      const body = await this.metrics.text();
      res.writeHead(200, { 'content-type': this.metrics.contentType, 'cache-control': 'no-store' });
      res.end(req.method === 'HEAD' ? undefined : body);
    } catch (e) {
      res
        .writeHead(500, { 'content-type': 'text/plain; charset=utf-8' })
        .end(`metrics collection failed: ${String(e)}\n`);
    }
  }
}
