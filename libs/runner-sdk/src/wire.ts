import * as fs from 'node:fs';
import * as path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import type { WireStruct } from './json';

/*
 * The Runner Protocol v1 contract, loaded at run time from the .proto files: the packed SDK
 * carries them in `proto/` (its build script copies the repository's proto/runnerhost at
 * build time); inside the repository they are read from the repository's proto/ (or dist/proto).
 */

const GATEWAY = 'runnerhost/v1/gateway.proto';
const HOST_API = 'runnerhost/v1/host_api.proto';

/** snake_case field names, int64 as number, unset messages as null, the oneof name in `msg`. */
export const LOADER_OPTIONS: protoLoader.Options = {
  keepCase: true,
  longs: Number,
  enums: String,
  defaults: true,
  oneofs: true,
};

/** Where the .proto files are: `RUNNERHOST_PROTO_DIR`, the package's proto/, or the repository's. */
export function protoDir(env: NodeJS.ProcessEnv = process.env): string {
  // The package's own build runs from <pkg>/dist; inside the repository the code runs from
  // libs/runner-sdk/src (ts) or dist/libs/runner-sdk/src (the host's build, which copies proto/).
  const packed = path.basename(__dirname) === 'dist';
  const candidates = [
    env.RUNNERHOST_PROTO_DIR,
    ...(packed ? [path.resolve(__dirname, '..', 'proto')] : []),
    path.resolve(__dirname, '..', '..', '..', 'proto'),
  ];
  for (const dir of candidates) {
    if (dir && fs.existsSync(path.join(dir, GATEWAY))) {
      return dir;
    }
  }
  throw new Error(`runner-sdk: cannot find ${GATEWAY} (set RUNNERHOST_PROTO_DIR to the folder holding runnerhost/)`);
}

interface Services {
  RunnerGatewayService: grpc.ServiceClientConstructor;
  HostApiService: grpc.ServiceClientConstructor;
}
let services: Services | undefined;

/** The generated client classes (loaded once per process). */
export function loadServices(): Services {
  if (!services) {
    const definition = protoLoader.loadSync([GATEWAY, HOST_API], { ...LOADER_OPTIONS, includeDirs: [protoDir()] });
    const pkg = grpc.loadPackageDefinition(definition) as unknown as { runnerhost: { v1: Services } };
    services = pkg.runnerhost.v1;
  }
  return services;
}

/**
 * Channel options of both clients: the same options put the gateway stream and the host API
 * calls on one HTTP/2 connection. Retries are off: the SDK reconnects by itself, and with
 * retries on grpc-js keeps a copy of every message written on the long-lived stream.
 */
export const CHANNEL_OPTIONS: grpc.ChannelOptions = { 'grpc.enable_retries': 0 };

// ---- wire shapes of the gateway messages (what proto-loader hands over and takes) --------------

export interface WireRunResult {
  run_id: string;
  type: string;
  data: WireStruct;
  usage?: WireStruct;
  sequence?: number;
  timestamp?: number;
}

export interface WirePluginMessage {
  hello?: {
    plugin_author: string;
    plugin_name: string;
    plugin_version: string;
    protocol_version: string;
    manifests: WireStruct[];
  };
  result?: WireRunResult;
  results?: { results: WireRunResult[] };
  heartbeat?: { active_run_ids: string[] };
  pong?: { nonce: number };
}

export interface WireWelcome {
  session_id: string;
  host_version: string;
  protocol_version: string;
  runners: { runner_id: string; name: string }[];
  rejected: { index: number; name: string; reason: string }[];
  heartbeat_interval_ms: number;
}

export type WireHostMessage =
  | { msg: 'welcome'; welcome: WireWelcome }
  | { msg: 'run'; run: { runner_id: string; runner_name: string; context: Record<string, unknown> | null } }
  | { msg: 'cancel'; cancel: { run_id: string; reason: string } }
  | { msg: 'ping'; ping: { nonce: number } };

export type ConnectCall = grpc.ClientDuplexStream<WirePluginMessage, WireHostMessage>;
