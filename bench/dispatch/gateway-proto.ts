import * as grpc from '@grpc/grpc-js';
import { loadProtos } from '../common/proto';

/*
 * The Runner Protocol gateway contract, reused by the bare bidi floor: the client sends
 * PluginMessage{heartbeat}, the server answers HostMessage{ping}. Same loader options as the host
 * and the demo runner.
 */

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
  const pkg = loadProtos(['runnerhost/v1/gateway.proto']) as unknown as {
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
