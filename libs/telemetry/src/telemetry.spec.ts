import * as http from 'node:http';
import { HostMetrics } from './metrics';
import { MetricsServer } from './metrics-server';
import { Telemetry } from './telemetry';

function get(url: string, method = 'GET'): Promise<{ status: number; type: string; body: string }> {
  return new Promise((resolve, reject) => {
    http
      .request(url, { method }, (res) => {
        let body = '';
        res.on('data', (d: Buffer) => (body += d.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, type: String(res.headers['content-type']), body }));
      })
      .on('error', reject)
      .end();
  });
}

describe('Telemetry', () => {
  it('is a no-op until metrics are enabled', () => {
    const t = new Telemetry();
    expect(t.metrics).toBeNull();
    expect(() => {
      t.eventAdmitted('started', 'plugin:a/b/c');
      t.runEnded('plugin:a/b/c', 'completed', Date.now());
      t.sample('active_runs', () => 1);
      t.signalBus('memory', () => ({
        sent: 0,
        received: 0,
        dropped: 0,
        oversized: 0,
        disconnects: 0,
        connected: true,
      }));
      t.writerGroup(3, t.now(), false);
    }).not.toThrow();
  });

  it('counts by bounded labels and carries the host_instance label', async () => {
    const t = new Telemetry();
    const m = t.enableMetrics({ instance: 'host-a', processMetrics: false });
    expect(t.enableMetrics({ instance: 'other' })).toBe(m);
    t.eventAdmitted('started', 'plugin:a/b/c');
    t.eventAdmitted('started', 'plugin:a/b/c');
    t.eventAdmitted('steered', 'plugin:a/b/c');
    t.runEnded('plugin:a/b/c', 'failed', Date.now() - 1500);
    t.modelCall('m1', 'invoke', 'ok', t.now(), 10, 4, 'run-1');
    t.hostApiCall('state.get', 'permission_denied', t.now());
    t.sample('active_runs', () => 7);
    t.sample('outbox_oldest_pending_age_seconds', () => Promise.resolve(12.5));
    const text = await m.text();
    expect(text).toContain(
      'runnerhost_events_admitted_total{disposition="started",runner_id="plugin:a/b/c",host_instance="host-a"} 2',
    );
    expect(text).toContain(
      'runnerhost_events_admitted_total{disposition="steered",runner_id="plugin:a/b/c",host_instance="host-a"} 1',
    );
    expect(text).toContain(
      'runnerhost_runs_ended_total{status="failed",runner_id="plugin:a/b/c",host_instance="host-a"} 1',
    );
    expect(text).toMatch(
      /runnerhost_run_admission_to_end_seconds_bucket\{le="1",runner_id="plugin:a\/b\/c",host_instance="host-a"\} 0/,
    );
    expect(text).toMatch(
      /runnerhost_run_admission_to_end_seconds_bucket\{le="2.5",runner_id="plugin:a\/b\/c",host_instance="host-a"\} 1/,
    );
    expect(text).toContain('runnerhost_model_tokens_total{model_id="m1",type="prompt",host_instance="host-a"} 10');
    expect(text).toContain('runnerhost_model_tokens_total{model_id="m1",type="completion",host_instance="host-a"} 4');
    expect(text).toContain(
      'runnerhost_host_api_calls_total{action="state.get",outcome="permission_denied",host_instance="host-a"} 1',
    );
    expect(text).toContain('runnerhost_active_runs{host_instance="host-a"} 7');
    expect(text).toContain('runnerhost_outbox_oldest_pending_age_seconds{host_instance="host-a"} 12.5');
  });

  it('keeps answering when a sampler fails', async () => {
    const t = new Telemetry();
    const m = t.enableMetrics({ instance: 'x', processMetrics: false });
    t.sample('wal_bytes', () => {
      throw new Error('gone');
    });
    await expect(m.text()).resolves.toContain('runnerhost_wal_bytes');
  });
});

describe('signal bus metrics', () => {
  it("copies the bus's counters at each scrape, by bus and outcome", async () => {
    const t = new Telemetry();
    const m = t.enableMetrics({ instance: 'h', processMetrics: false });
    const counts = { sent: 3, received: 5, dropped: 1, oversized: 0, disconnects: 0, connected: true };
    t.signalBus('postgres', () => counts);
    let text = await m.text();
    expect(text).toContain('# TYPE runnerhost_signal_bus_signals_total counter');
    expect(text).toContain('runnerhost_signal_bus_signals_total{bus="postgres",outcome="sent",host_instance="h"} 3');
    expect(text).toContain(
      'runnerhost_signal_bus_signals_total{bus="postgres",outcome="received",host_instance="h"} 5',
    );
    expect(text).toContain('runnerhost_signal_bus_signals_total{bus="postgres",outcome="dropped",host_instance="h"} 1');
    expect(text).toContain(
      'runnerhost_signal_bus_signals_total{bus="postgres",outcome="oversized",host_instance="h"} 0',
    );
    expect(text).toContain('runnerhost_signal_bus_disconnects_total{bus="postgres",host_instance="h"} 0');
    expect(text).toContain('runnerhost_signal_bus_connected{bus="postgres",host_instance="h"} 1');

    Object.assign(counts, { sent: 10, disconnects: 2, connected: false });
    text = await m.text();
    // The bus's own totals, not added to the previous scrape's.
    expect(text).toContain('runnerhost_signal_bus_signals_total{bus="postgres",outcome="sent",host_instance="h"} 10');
    expect(text).toContain('runnerhost_signal_bus_disconnects_total{bus="postgres",host_instance="h"} 2');
    expect(text).toContain('runnerhost_signal_bus_connected{bus="postgres",host_instance="h"} 0');
  });

  it('leaves the series out when no bus is registered or its reader fails', async () => {
    const t = new Telemetry();
    const m = t.enableMetrics({ instance: 'h', processMetrics: false });
    expect(await m.text()).not.toMatch(/^runnerhost_signal_bus_\w+\{/m);
    t.signalBus('nats', () => {
      throw new Error('closed');
    });
    expect(await m.text()).not.toMatch(/^runnerhost_signal_bus_\w+\{/m);
  });
});

describe('MetricsServer', () => {
  const metrics = new HostMetrics({ instance: 'srv', processMetrics: false });
  const server = new MetricsServer(metrics);
  let base = '';
  beforeAll(async () => {
    base = `http://127.0.0.1:${await server.listen(0, '127.0.0.1')}`;
  });
  afterAll(() => server.close());

  it('serves GET /metrics in the Prometheus text format', async () => {
    const r = await get(`${base}/metrics`);
    expect(r.status).toBe(200);
    expect(r.type).toContain('text/plain; version=0.0.4');
    expect(r.body).toContain('# TYPE runnerhost_runs_ended_total counter');
  });

  it('answers 404 elsewhere and 405 to other methods', async () => {
    expect((await get(`${base}/`)).status).toBe(404);
    expect((await get(`${base}/metrics`, 'POST')).status).toBe(405);
  });
});
