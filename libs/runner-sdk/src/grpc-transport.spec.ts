import { getEventListeners } from 'node:events';
import * as grpc from '@grpc/grpc-js';
import { RunAbortedError } from './errors';
import { GrpcHostApiTransport } from './grpc-transport';
import { toValue } from './json';
import { loadServices } from './wire';

/*
 * The host API transport over real gRPC on loopback, against a HostApiService answering StateGet
 * (the service from the same .proto): calls of one run watch its signal with one listener in all,
 * removed once they have settled — the host-API bench's 16 calls at once made Node warn
 * "MaxListenersExceededWarning ... 11 abort listeners added to [AbortSignal]".
 */

const listeners = (signal: AbortSignal) => getEventListeners(signal, 'abort').length;

describe('GrpcHostApiTransport and the run signal', () => {
  let server: grpc.Server;
  let transport: GrpcHostApiTransport;
  /** StateGet answers are held here until the test releases them. */
  let held: (() => void)[] = [];
  let hold = false;
  /** The metadata each StateGet arrived with: authorization and traceparent. */
  const received: { authorization: unknown[]; traceparent: unknown[] }[] = [];

  beforeAll(async () => {
    server = new grpc.Server();
    server.addService(loadServices().HostApiService.service, {
      StateGet: (
        call: grpc.ServerUnaryCall<{ key: string }, unknown>,
        callback: grpc.sendUnaryData<{ value: unknown }>,
      ) => {
        received.push({
          authorization: call.metadata.get('authorization'),
          traceparent: call.metadata.get('traceparent'),
        });
        const answer = () => callback(null, { value: toValue(call.request.key) });
        if (hold) {
          held.push(answer);
        } else {
          answer();
        }
      },
    });
    const port = await new Promise<number>((resolve, reject) =>
      server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))),
    );
    transport = new GrpcHostApiTransport(`127.0.0.1:${port}`, 'token', grpc.credentials.createInsecure());
  });

  afterAll(() => {
    transport.close();
    server.forceShutdown();
  });

  afterEach(() => {
    hold = false;
    held.splice(0).forEach((answer) => answer());
    held = [];
  });

  const stateGet = (signal: AbortSignal, key: string) =>
    transport.unary('StateGet', { run_id: 'r1', scope: 'conversation', key }, { signal });

  it('leaves no listener on the signal after calls one after another', async () => {
    const { signal } = new AbortController();
    for (let i = 0; i < 30; i++) {
      await expect(stateGet(signal, `k${i}`)).resolves.toEqual({ value: `k${i}` });
    }
    expect(listeners(signal)).toBe(0);
  });

  it('puts one listener on the signal for 16 calls in flight, none once they are answered, and no warning', async () => {
    const warnings: string[] = [];
    const onWarning = (w: Error) => warnings.push(w.name);
    process.on('warning', onWarning);
    try {
      const { signal } = new AbortController();
      hold = true;
      const calls = Array.from({ length: 16 }, (_, i) => stateGet(signal, `k${i}`));
      while (held.length < 16) {
        await new Promise((resolve) => setImmediate(resolve));
      }
      expect(listeners(signal)).toBe(1);
      held.splice(0).forEach((answer) => answer());
      await expect(Promise.all(calls)).resolves.toHaveLength(16);
      expect(listeners(signal)).toBe(0);
      await new Promise((resolve) => setImmediate(resolve));
      expect(warnings).not.toContain('MaxListenersExceededWarning');
    } finally {
      process.off('warning', onWarning);
    }
  });

  it('sends the token with every call and each call’s own traceparent, and leaves the shared metadata as built', async () => {
    received.length = 0;
    const { signal } = new AbortController();
    const tp = (n: number) => `00-${String(n).repeat(32)}-${String(n).repeat(16)}-01`;
    const traceparents = [undefined, tp(1), tp(1), tp(2), undefined, tp(1)];
    for (const [i, traceparent] of traceparents.entries()) {
      await expect(
        transport.unary('StateGet', { run_id: 'r1', scope: 'conversation', key: `k${i}` }, { signal, traceparent }),
      ).resolves.toEqual({ value: `k${i}` });
    }
    expect(received).toEqual(
      traceparents.map((traceparent) => ({
        authorization: ['Bearer token'],
        traceparent: traceparent ? [traceparent] : [],
      })),
    );
    // grpc-js adds its own headers (grpc-accept-encoding, ...) to its copy of a call's metadata, not to the shared one.
    const shared = (transport as unknown as { plain: grpc.Metadata }).plain;
    expect(Object.keys(shared.getMap())).toEqual(['authorization']);
  });

  it('rejects every call in flight with the signal’s reason when it aborts, and removes the listener', async () => {
    const controller = new AbortController();
    hold = true;
    const calls = Array.from({ length: 12 }, (_, i) => stateGet(controller.signal, `k${i}`));
    while (held.length < 12) {
      await new Promise((resolve) => setImmediate(resolve));
    }
    const reason = new RunAbortedError('cancelled', 'cancelled by the host');
    controller.abort(reason);
    const outcomes = await Promise.allSettled(calls);
    expect(outcomes.every((o) => o.status === 'rejected' && o.reason === reason)).toBe(true);
    expect(listeners(controller.signal)).toBe(0);
  });
});
