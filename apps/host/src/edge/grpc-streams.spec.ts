import * as grpc from '@grpc/grpc-js';
import { http2StreamOf, resetHalfOpenStreams } from './grpc-streams';

/*
 * http2StreamOf reads a private field of grpc-js: this runs a real grpc-js server so a grpc-js
 * release that moves the field fails here rather than silently in production.
 */
const identity = (b: Buffer) => b;
const service: grpc.ServiceDefinition = {
  Echo: {
    path: '/test.Probe/Echo',
    requestStream: false,
    responseStream: false,
    requestSerialize: identity,
    requestDeserialize: identity,
    responseSerialize: identity,
    responseDeserialize: identity,
  },
  Upload: {
    path: '/test.Probe/Upload',
    requestStream: true,
    responseStream: false,
    requestSerialize: identity,
    requestDeserialize: identity,
    responseSerialize: identity,
    responseDeserialize: identity,
  },
};

/** A real grpc-js server of `service` with `interceptor` and `handlers`, and a client of it. */
async function startProbe(
  interceptor: grpc.ServerInterceptor,
  handlers: grpc.UntypedServiceImplementation,
): Promise<{ client: grpc.Client; close: () => void }> {
  const server = new grpc.Server({ interceptors: [interceptor] });
  server.addService(service, handlers);
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, p) =>
      err ? reject(err) : resolve(p),
    ),
  );
  const Client = grpc.makeGenericClientConstructor(service, 'Probe');
  const client = new Client(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
  return {
    client,
    close: () => {
      client.close();
      server.forceShutdown();
    },
  };
}

/** A client-streaming Upload of `chunks`: its answer. */
function upload(client: grpc.Client, chunks: Buffer[]): Promise<Buffer> {
  return new Promise<Buffer>((resolve, reject) => {
    const call = client.makeClientStreamRequest<Buffer, Buffer>('/test.Probe/Upload', identity, identity, (err, res) =>
      err || !res ? reject(err ?? new Error('no answer')) : resolve(res),
    );
    for (const chunk of chunks) {
      call.write(chunk);
    }
    call.end();
  });
}

/** The Upload handler of both suites: reads the stream to its end, then answers `ok`. */
const uploadOk = (call: grpc.ServerReadableStream<Buffer, Buffer>, done: grpc.sendUnaryData<Buffer>) => {
  call.on('data', () => undefined);
  call.on('end', () => done(null, Buffer.from('ok')));
};

describe('http2StreamOf', () => {
  it('finds the HTTP/2 stream of a real grpc-js server call', async () => {
    const seen: unknown[] = [];
    const probe: grpc.ServerInterceptor = (_method, call) => {
      try {
        seen.push(http2StreamOf(call));
      } catch (e) {
        seen.push(e);
      }
      return new grpc.ServerInterceptingCall(call);
    };
    const { client, close } = await startProbe(probe, { Upload: uploadOk });
    try {
      const answer = await upload(client, [Buffer.from('x')]);
      expect(answer.toString()).toBe('ok');
      expect(seen).toHaveLength(1);
      expect(seen[0]).not.toBeInstanceOf(Error);
      expect(typeof (seen[0] as { respond?: unknown }).respond).toBe('function');
    } finally {
      close();
    }
  });

  it('throws, naming the field, for a call without an HTTP/2 stream', () => {
    const call = {} as grpc.ServerInterceptingCallInterface;
    expect(() => http2StreamOf(call)).toThrow(/HTTP\/2 `stream` field/);
  });
});

describe('resetHalfOpenStreams', () => {
  it('hands a unary call on as grpc-js made it (no layer per host API call); answers and errors reach the client', async () => {
    const given: unknown[] = [];
    const returned: unknown[] = [];
    const spy: grpc.ServerInterceptor = (method, call) => {
      given.push(call);
      const out = resetHalfOpenStreams(method, call);
      returned.push(out);
      return out;
    };
    const { client, close } = await startProbe(spy, {
      Echo: (call: grpc.ServerUnaryCall<Buffer, Buffer>, done: grpc.sendUnaryData<Buffer>) => {
        if (call.request.toString() === 'fail') {
          const metadata = new grpc.Metadata();
          metadata.set('x-error-code', 'not_found');
          done({ code: grpc.status.NOT_FOUND, details: 'no such thing', metadata });
        } else {
          done(null, Buffer.from(`echo ${call.request.toString()}`));
        }
      },
      Upload: uploadOk,
    });
    const echo = (text: string) =>
      new Promise<Buffer>((resolve, reject) =>
        client.makeUnaryRequest<Buffer, Buffer>(
          '/test.Probe/Echo',
          identity,
          identity,
          Buffer.from(text),
          (err, res) => (err || !res ? reject(err ?? new Error('no answer')) : resolve(res)),
        ),
      );
    try {
      expect((await echo('hi')).toString()).toBe('echo hi');
      const failed = (await echo('fail').catch((e: unknown) => e)) as grpc.ServiceError;
      expect(failed.code).toBe(grpc.status.NOT_FOUND);
      expect(failed.details).toBe('no such thing');
      expect(failed.metadata.get('x-error-code')).toEqual(['not_found']);
      expect(returned).toHaveLength(2);
      expect(returned[0]).toBe(given[0]);
      expect(returned[1]).toBe(given[1]);
      // A client-streaming call (Connect) gets the layer that resets a half-open stream after its status.
      await upload(client, []);
      expect(returned).toHaveLength(3);
      expect(returned[2]).toBeInstanceOf(grpc.ServerInterceptingCall);
      expect(returned[2]).not.toBe(given[2]);
    } finally {
      close();
    }
  });
});
