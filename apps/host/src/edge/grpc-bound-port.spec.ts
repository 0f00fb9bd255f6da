import * as grpc from '@grpc/grpc-js';
import { boundGrpcPort } from './grpc-bound-port';

describe('boundGrpcPort', () => {
  const servers: grpc.Server[] = [];
  afterEach(() => {
    for (const s of servers.splice(0)) {
      s.forceShutdown();
    }
  });

  const bind = (server: grpc.Server, address: string) =>
    new Promise<number>((resolve, reject) =>
      server.bindAsync(address, grpc.ServerCredentials.createInsecure(), (e, port) => (e ? reject(e) : resolve(port))),
    );

  it('reads the port a server bound on port 0 got (what bindAsync reported)', async () => {
    const server = new grpc.Server();
    servers.push(server);
    const port = await bind(server, '127.0.0.1:0');
    expect(port).toBeGreaterThan(0);
    expect(boundGrpcPort(server)).toBe(port);
  });

  it('is null before the server is bound, or for something that is not a grpc-js server', () => {
    const server = new grpc.Server();
    servers.push(server);
    expect(boundGrpcPort(server)).toBeNull();
    expect(boundGrpcPort({} as grpc.Server)).toBeNull();
  });
});
