import * as path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import type { Struct } from './struct';

/*
 * Loads the Runner Protocol v1 contract from the .proto files at run time, and types the few
 * message fields this runner touches. A plugin in another language would generate its stubs from
 * the same files: proto/runnerhost/v1/gateway.proto and context.proto.
 */

/** `RUNNERHOST_PROTO_DIR`, or the repository's `proto/` (from bench/dispatch/raw-runner/ or from dist/bench/dispatch/raw-runner/). */
export function protoDir(): string {
  return process.env.RUNNERHOST_PROTO_DIR ?? path.resolve(__dirname, '..', '..', '..', 'proto');
}

/** The host's loader options: snake_case field names, int64 as number, enums as strings. */
export const LOADER_OPTIONS: protoLoader.Options = {
  keepCase: true,
  longs: Number,
  enums: String,
  defaults: true,
  oneofs: true,
};

// ---- Plugin -> host -------------------------------------------------------------------------

export interface Hello {
  plugin_author: string;
  plugin_name: string;
  plugin_version: string;
  protocol_version: string;
  manifests: Struct[];
}

export interface RunResult {
  run_id: string;
  type: string;
  data: Struct;
  usage?: Struct;
  /** Optional: when left out the host assigns last+1. */
  sequence?: number;
  /** Epoch seconds. */
  timestamp?: number;
}

/** Exactly one field is set. */
export interface PluginMessage {
  hello?: Hello;
  result?: RunResult;
  /** Several results in one frame (in order). */
  results?: { results: RunResult[] };
  heartbeat?: { active_run_ids: string[] };
  pong?: { nonce: number };
}

// ---- Host -> plugin -------------------------------------------------------------------------

export interface Welcome {
  session_id: string;
  host_version: string;
  protocol_version: string;
  runners: { runner_id: string; name: string }[];
  rejected: { index: number; name: string; reason: string }[];
  heartbeat_interval_ms: number;
}

/** The part of RunContext (context.proto) this runner reads; unset message fields decode as null. */
export interface RunContext {
  run_id: string;
  input: { text?: string; interaction?: Struct | null } | null;
  event?: { event_type?: string } | null;
  config: Struct | null;
}

export interface RunRequest {
  runner_id: string;
  runner_name: string;
  context: RunContext | null;
  /** W3C trace context of the run when the host exports traces, else empty. */
  traceparent: string;
}

/** Exactly one field is set, and `msg` names it (loader option `oneofs: true`). */
export type HostMessage =
  | { msg: 'welcome'; welcome: Welcome }
  | { msg: 'run'; run: RunRequest }
  | { msg: 'cancel'; cancel: { run_id: string; reason: string } }
  | { msg: 'ping'; ping: { nonce: number } };

// ---- The service ----------------------------------------------------------------------------

export type ConnectCall = grpc.ClientDuplexStream<PluginMessage, HostMessage>;

export interface GatewayClient extends grpc.Client {
  Connect(metadata: grpc.Metadata, options?: grpc.CallOptions): ConnectCall;
}

/** The generated client class of `runnerhost.v1.RunnerGatewayService` (its `.service` serves a fake host). */
export function loadGatewayService(dir = protoDir()): grpc.ServiceClientConstructor {
  const definition = protoLoader.loadSync('runnerhost/v1/gateway.proto', { ...LOADER_OPTIONS, includeDirs: [dir] });
  const pkg = grpc.loadPackageDefinition(definition) as unknown as {
    runnerhost: { v1: { RunnerGatewayService: grpc.ServiceClientConstructor } };
  };
  return pkg.runnerhost.v1.RunnerGatewayService;
}

/**
 * A client for the host at `url` (host:port). Retries are off: the runner reconnects by itself,
 * and with retries on grpc-js keeps a copy of every message written on the long-lived stream and
 * acknowledges writes before they reach the transport.
 */
export function createGatewayClient(url: string, credentials = grpc.credentials.createInsecure()): GatewayClient {
  const Client = loadGatewayService();
  return new Client(url, credentials, { 'grpc.enable_retries': 0 }) as unknown as GatewayClient;
}
