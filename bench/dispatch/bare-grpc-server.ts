import * as grpc from '@grpc/grpc-js';
import { serveForParent } from '../common/port-handshake';
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

serveForParent(server, 'bare-grpc-server');
