import * as grpc from '@grpc/grpc-js';
import { loadGateway, type HostMessage, type PluginMessage } from './gateway-proto';

/*
 * Child process of the bench: a bare grpc-js server for the bidi floor. Each PluginMessage on a
 * Connect stream is answered with one HostMessage{ping}. Prints the bound port on stdout and exits
 * when its stdin closes (so it never outlives the bench) or on SIGTERM.
 */

const server = new grpc.Server();
server.addService(loadGateway().service, {
  Connect: (call: grpc.ServerDuplexStream<PluginMessage, HostMessage>) => {
    let nonce = 0;
    call.on('data', () => {
      call.write({ ping: { nonce: ++nonce } });
    });
    call.on('end', () => call.end());
    call.on('error', () => undefined);
  },
});

server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, port) => {
  if (err) {
    process.stderr.write(`bare-grpc-server: ${err.message}\n`);
    process.exit(1);
  }
  process.stdout.write(`${port}\n`);
});

const stop = (): void => {
  server.forceShutdown();
  process.exit(0);
};
process.stdin.on('end', stop);
process.stdin.on('close', stop);
process.stdin.resume();
process.on('SIGTERM', stop);
