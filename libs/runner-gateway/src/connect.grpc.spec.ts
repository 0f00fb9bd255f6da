import * as http2 from 'node:http2';
import * as grpc from '@grpc/grpc-js';
import type { PluginMessage } from '@libs/proto';
import type { ConnectOutlet, ConnectSessionHandler, ConnectStream } from './connect-session.handler';
import { connectHandler } from './connect.grpc';
import { grpcErrorOf } from './grpc-error';
import { http2StreamOfHandlerCall } from './half-open';
import { follow, json, jsonBidiService } from './testing/json-bidi';

/*
 * The Connect adapter on a real grpc-js server (JSON bytes for the messages: the adapter does not
 * care how they are encoded), with a scripted session in place of ConnectSessionHandler.
 */
const PATH = '/runnerhost.v1.RunnerGatewayService/Connect';
const service = jsonBidiService(PATH);

/** What the adapter told the session, and the outlet it got. */
class ScriptedSessions {
  events: string[] = [];
  outlet!: ConnectOutlet;
  onMessage: (m: PluginMessage, outlet: ConnectOutlet) => void = () => undefined;
  private resolveOpened: () => void = () => undefined;
  readonly opened = new Promise<void>((resolve) => (this.resolveOpened = resolve));

  open(metadata: grpc.Metadata, outlet: ConnectOutlet): ConnectStream {
    this.outlet = outlet;
    this.events.push(`open ${String(metadata.get('authorization')[0])}`);
    this.resolveOpened();
    return {
      receive: (m) => {
        this.events.push(`receive ${JSON.stringify(m)}`);
        this.onMessage(m, outlet);
      },
      halfClosed: () => {
        this.events.push('halfClosed');
        outlet.end();
      },
      closed: () => this.events.push('closed'),
    };
  }
}

async function start(sessions: ScriptedSessions) {
  const server = new grpc.Server();
  server.addService(service, { Connect: connectHandler(sessions as unknown as ConnectSessionHandler) });
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, p) =>
      err ? reject(err) : resolve(p),
    ),
  );
  const client = new grpc.Client(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
  const metadata = new grpc.Metadata();
  metadata.set('authorization', 'Bearer t');
  const call = () => client.makeBidiStreamRequest<unknown, unknown>(PATH, json.serialize, json.deserialize, metadata);
  return {
    port,
    call,
    close: () => {
      client.close();
      server.forceShutdown();
    },
  };
}

describe('connectHandler: the Connect stream on grpc-js directly', () => {
  it('hands each message to the session in order, writes its messages, and ends OK when the plugin closes its half', async () => {
    const sessions = new ScriptedSessions();
    sessions.onMessage = (m, outlet) => outlet.send({ ping: { nonce: (m as unknown as { n: number }).n } });
    const { call, close } = await start(sessions);
    try {
      const c = call();
      const { received, ended } = follow(c);
      c.write({ n: 1 });
      c.write({ n: 2 });
      c.end();
      expect(await ended).toMatchObject({ code: grpc.status.OK });
      expect(received).toEqual([{ ping: { nonce: 1 } }, { ping: { nonce: 2 } }]);
      expect(sessions.events.slice(0, 4)).toEqual([
        'open Bearer t',
        'receive {"n":1}',
        'receive {"n":2}',
        'halfClosed',
      ]);
      // grpc-js reports a finished call as cancelled too: the session's closed() is idempotent.
      expect(sessions.events.slice(4)).toEqual(sessions.events.length > 4 ? ['closed'] : []);
    } finally {
      close();
    }
  });

  it("ends the call with the session's status (code, details, x-error-code), after the messages written before it", async () => {
    const sessions = new ScriptedSessions();
    const { call, close } = await start(sessions);
    try {
      const c = call();
      const { received, ended } = follow(c);
      await sessions.opened;
      // Far more than grpc-js's high-water mark: the writes wait in its stream buffer, in order.
      const many = Array.from({ length: 500 }, (_, i) => ({ ping: { nonce: i } }));
      for (const m of many) {
        sessions.outlet.send(m);
      }
      sessions.outlet.fail(grpcErrorOf('invalid_argument', 'no hello within 10 s'));
      // Once the stream ended, the outlet writes and ends nothing more.
      sessions.outlet.send({ ping: { nonce: -1 } });
      sessions.outlet.end();
      expect(await ended).toEqual({
        code: grpc.status.INVALID_ARGUMENT,
        details: 'no hello within 10 s',
        xErrorCode: 'invalid_argument',
      });
      expect(received).toEqual(many);
    } finally {
      close();
    }
  });

  it('tells the session when the client cancels the call', async () => {
    const sessions = new ScriptedSessions();
    const { call, close } = await start(sessions);
    try {
      const c = call();
      const { ended } = follow(c);
      await sessions.opened;
      c.cancel();
      await ended;
      await new Promise<void>((resolve) => {
        const check = () => (sessions.events.includes('closed') ? resolve() : setImmediate(check));
        check();
      });
      // A cancelled call's request also ends (grpc-js pushes its end first), as it did under Nest.
      expect(sessions.events[0]).toBe('open Bearer t');
      expect(sessions.events.at(-1)).toBe('closed');
    } finally {
      close();
    }
  });

  it('resets (RST_STREAM NO_ERROR) a stream whose client keeps its half open after the status', async () => {
    const sessions = new ScriptedSessions();
    const { port, close } = await start(sessions);
    const session = http2.connect(`http://127.0.0.1:${port}`);
    session.on('error', () => undefined);
    try {
      const stream = session.request({
        ':method': 'POST',
        ':path': PATH,
        'content-type': 'application/grpc',
        te: 'trailers',
      });
      stream.on('data', () => undefined);
      stream.on('error', () => undefined);
      let status: unknown;
      stream.on('response', (h) => (status = h['grpc-status']));
      await sessions.opened;
      sessions.outlet.fail(grpcErrorOf('unauthenticated', 'missing plugin token'));
      // The client never ends its half: only the server can close the stream.
      const rstCode = await new Promise<number | undefined>((resolve) =>
        stream.on('close', () => resolve(stream.rstCode)),
      );
      expect(status).toBe('16');
      expect(rstCode).toBe(http2.constants.NGHTTP2_NO_ERROR);
    } finally {
      session.destroy();
      close();
    }
  });
});

describe('http2StreamOfHandlerCall', () => {
  it('finds the HTTP/2 stream of a real grpc-js handler call', async () => {
    const seen: unknown[] = [];
    const server = new grpc.Server();
    server.addService(service, {
      Connect: (call: grpc.ServerDuplexStream<unknown, unknown>) => {
        try {
          seen.push(http2StreamOfHandlerCall(call));
        } catch (e) {
          seen.push(e);
        }
        call.end();
      },
    });
    const port = await new Promise<number>((resolve, reject) =>
      server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, p) =>
        err ? reject(err) : resolve(p),
      ),
    );
    const client = new grpc.Client(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
    try {
      const c = client.makeBidiStreamRequest<unknown, unknown>(PATH, json.serialize, json.deserialize);
      await follow(c).ended;
      expect(seen).toHaveLength(1);
      expect(seen[0]).not.toBeInstanceOf(Error);
      expect(typeof (seen[0] as { respond?: unknown }).respond).toBe('function');
    } finally {
      client.close();
      server.forceShutdown();
    }
  });

  it('throws, naming the field, for a call without an HTTP/2 stream', () => {
    expect(() => http2StreamOfHandlerCall({})).toThrow(/HTTP\/2 `call.stream` field/);
    expect(() => http2StreamOfHandlerCall({ call: {} })).toThrow(/HTTP\/2 `call.stream` field/);
  });
});
