import * as http2 from 'node:http2';
import { Host, TestDatabase, event, parseSse, startDemoRunner, type Proc } from './harness';

jest.setTimeout(120_000);

/*
 * Issue 23 item 4f, through the real wires: an oversized request header answers the error model;
 * a raw HTTP/2 client cannot hold gRPC streams open (a bound per connection, and a stream whose
 * call is over is reset even if the client never ends its half); an open event stream ends when
 * the API key that opened it (or minted its stream token) is revoked.
 */

const STREAMS = 8;
const CONNECT = '/runnerhost.v1.RunnerGatewayService/Connect';

describe('edges: header size, HTTP/2 streams, revoked keys', () => {
  const db = new TestDatabase();
  const host = new Host(db, { GRPC_MAX_CONCURRENT_STREAMS: String(STREAMS) });
  let runner: Proc;
  let pluginToken: string;

  beforeAll(async () => {
    await host.start();
    let runnerId: string;
    ({ runner, runnerId } = await startDemoRunner(host));
    const agent = { agent_id: 'stall', runner_id: runnerId, runner_config: { mode: 'stall' } };
    expect((await host.api('POST', '/v1/admin/agents', agent)).status).toBe(201);
    pluginToken = (await host.api('POST', '/v1/admin/plugins', { author: 'raw', name: 'h2' })).body.token;
  });

  afterAll(async () => {
    await runner?.stop();
    await host.stop();
    await db.drop();
  });

  it('a 17 KB header answers 431 with the error model, and the host serves on', async () => {
    const res = await fetch(`${host.http}/v1/runs`, {
      headers: { authorization: 'Bearer x', 'x-padding': 'p'.repeat(17 * 1024) },
    });
    expect(res.status).toBe(431);
    expect(res.headers.get('content-type')).toContain('application/json');
    expect(await res.json()).toEqual({
      error: {
        code: 'payload_too_large',
        message: 'request headers: larger than the limit of 16384 bytes',
        retryable: false,
        details: { field: 'headers', limit: 16384 },
      },
    });
    expect((await host.api('GET', '/health/live')).status).toBe(200);
  });

  it('advertises a bound on concurrent streams and resets Connect streams that never send hello', async () => {
    const session = http2.connect(`http://${host.grpc}`);
    session.on('error', () => undefined);
    try {
      await new Promise((resolve) => session.once('remoteSettings', resolve));
      expect(session.remoteSettings.maxConcurrentStreams).toBe(STREAMS);

      const log: string[] = [];
      const open = (label: string, headers: http2.OutgoingHttpHeaders) => {
        const stream = session.request({ ':method': 'POST', ':path': CONNECT, ...headers });
        let status: string | undefined;
        stream.on('response', (h) => {
          status = String(h['grpc-status'] ?? status ?? '');
          log.push(`${label} status ${status}`);
        });
        stream.on('trailers', (h) => {
          status = String(h['grpc-status']);
        });
        stream.on('data', () => undefined);
        stream.on('error', () => undefined);
        // The client never ends its half: only the server can close these streams.
        return new Promise<{ status: string | undefined; rstCode: number }>((resolve) =>
          stream.on('close', () => {
            log.push(`${label} closed`);
            resolve({ status, rstCode: stream.rstCode ?? -1 });
          }),
        );
      };
      const grpcHeaders = { 'content-type': 'application/grpc', te: 'trailers' };
      const withToken = { ...grpcHeaders, authorization: `Bearer ${pluginToken}` };
      // One more than the bound: the last waits (client side) until the host frees a stream.
      const silent = Array.from({ length: STREAMS }, (_, i) => open(`silent-${i}`, withToken));
      const queued = open('queued', grpcHeaders);
      const ends = await Promise.all(silent);
      for (const end of ends) {
        expect(end).toEqual({ status: '3', rstCode: http2.constants.NGHTTP2_NO_ERROR }); // INVALID_ARGUMENT: no hello
      }
      expect(await queued).toEqual({ status: '16', rstCode: http2.constants.NGHTTP2_NO_ERROR }); // UNAUTHENTICATED
      // The queued stream was served only after a silent one had been closed.
      expect(log.indexOf('queued status 16')).toBeGreaterThan(log.findIndex((l) => l.endsWith('closed')));
    } finally {
      session.destroy();
    }
    expect((await host.api('GET', '/health/live')).status).toBe(200);
  });

  /** Opens the stream and reads it until it ends; `onFirst` runs after the first frame arrived. */
  async function follow(url: string, headers: Record<string, string>, onFirst: () => Promise<void>) {
    const res = await fetch(url, { headers });
    expect(res.status).toBe(200);
    const reader = res.body!.getReader();
    let text = '';
    let acted = false;
    let ended: 'end' | 'error' = 'end';
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) {
          break;
        }
        text += new TextDecoder().decode(value);
        if (!acted && parseSse(text.slice(0, text.lastIndexOf('\n\n') + 2)).length > 0) {
          acted = true;
          await onFirst();
        }
      }
    } catch {
      ended = 'error';
    }
    return { frames: parseSse(text.slice(0, text.lastIndexOf('\n\n') + 2)), ended, acted };
  }

  it.each(['stream token', 'bearer key'])(
    'an open event stream (opened with a %s) ends when the key is revoked; reopening answers 401',
    async (how) => {
      const key = (await host.api('POST', '/v1/admin/api-keys', { name: `revoked-${how}`, role: 'platform' })).body;
      const started = await host.api('POST', '/v1/events', event('stall', 'hold the stream open'), key.key);
      expect(started.status).toBe(202);
      const runId = started.body.run_id as string;
      const token = (await host.api('POST', `/v1/runs/${runId}/stream-tokens`, undefined, key.key)).body.token;
      const url =
        how === 'stream token'
          ? `${host.http}/v1/runs/${runId}/events?stream_token=${encodeURIComponent(token)}`
          : `${host.http}/v1/runs/${runId}/events`;
      const headers: Record<string, string> = how === 'stream token' ? {} : { authorization: `Bearer ${key.key}` };
      const seen = await follow(url, headers, async () => {
        expect((await host.api('DELETE', `/v1/admin/api-keys/${key.id}`)).status).toBe(204);
      });
      expect(seen.acted).toBe(true);
      // The run is still going: the stream ended because of the revocation, not the run.
      expect(seen.frames.some((f) => f.event === 'run.completed' || f.event === 'run.failed')).toBe(false);
      expect((await host.api('GET', `/v1/runs/${runId}`)).body.status).toBe('running');
      expect((await fetch(url, { headers })).status).toBe(401);
      expect((await host.api('POST', `/v1/runs/${runId}/cancel`)).status).toBe(200);
    },
  );
});
