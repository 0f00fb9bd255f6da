import * as path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';

/*
 * The Runner Protocol gateway contract, reused by the bare bidi floor: the client sends
 * PluginMessage{heartbeat}, the server answers HostMessage{ping}. Same loader options as the host
 * and the demo runner.
 */

/** `proto/` of the repository, from bench/dispatch/ and from dist/bench/dispatch/ alike. */
export const PROTO_DIR = path.resolve(__dirname, '..', '..', 'proto');

export interface PluginMessage {
  heartbeat?: { active_run_ids: string[] };
}

export interface HostMessage {
  ping?: { nonce: number };
}

export interface GatewayClient extends grpc.Client {
  Connect(metadata: grpc.Metadata): grpc.ClientDuplexStream<PluginMessage, HostMessage>;
}

export function loadGateway(): grpc.ServiceClientConstructor {
  const definition = protoLoader.loadSync('runnerhost/v1/gateway.proto', {
    keepCase: true,
    longs: Number,
    enums: String,
    defaults: true,
    oneofs: true,
    includeDirs: [PROTO_DIR],
  });
  const pkg = grpc.loadPackageDefinition(definition) as unknown as {
    runnerhost: { v1: { RunnerGatewayService: grpc.ServiceClientConstructor } };
  };
  return pkg.runnerhost.v1.RunnerGatewayService;
}

/** Client with retries off, as for the runner's long-lived stream (see apps/demo-runner/README.md). */
export function createGatewayClient(address: string): GatewayClient {
  const Client = loadGateway();
  return new Client(address, grpc.credentials.createInsecure(), {
    'grpc.enable_retries': 0,
  }) as unknown as GatewayClient;
}
