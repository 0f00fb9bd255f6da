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

type GrpcNode = grpc.GrpcObject | grpc.ServiceClientConstructor | grpc.ProtobufTypeDefinition;

/** The client class of the service `name` (`runnerhost.v1.X`) in a loaded package; throws when it is not one. */
function serviceAt(pkg: grpc.GrpcObject, name: string): grpc.ServiceClientConstructor {
  let node: GrpcNode | undefined = pkg;
  for (const part of name.split('.')) {
    node = node && typeof node === 'object' && !('format' in node) ? node[part] : undefined;
  }
  if (typeof node !== 'function') {
    throw new Error(`runner-sdk: ${name} is not a service of the loaded .proto files`);
  }
  return node;
}

/** The generated client classes (loaded once per process). */
export function loadServices(): Services {
  if (!services) {
    const definition = protoLoader.loadSync([GATEWAY, HOST_API], { ...LOADER_OPTIONS, includeDirs: [protoDir()] });
    const pkg = grpc.loadPackageDefinition(definition);
    services = {
      RunnerGatewayService: serviceAt(pkg, 'runnerhost.v1.RunnerGatewayService'),
      HostApiService: serviceAt(pkg, 'runnerhost.v1.HostApiService'),
    };
  }
  return services;
}

/**
 * A method of a loaded service: its path and its proto-loader encoder and decoder, typed with the
 * SDK's wire shapes of its request and answer (below, and host-api.ts). grpc-js types a loaded
 * method's messages as `any`; this is where they get the shape the .proto gives them.
 */
export interface WireMethod<Req, Res> {
  path: string;
  serialize: (value: Req) => Buffer;
  deserialize: (bytes: Buffer) => Res;
}

export function wireMethod<Req, Res>(service: grpc.ServiceClientConstructor, name: string): WireMethod<Req, Res> {
  const method = service.service[name];
  if (!method) {
    throw new Error(`runner-sdk: ${service.serviceName} has no method ${name}`);
  }
  return { path: method.path, serialize: method.requestSerialize, deserialize: method.responseDeserialize };
}

/** Opens RunnerGatewayService/Connect on a client of that service. */
export function openConnect(client: grpc.Client, metadata: grpc.Metadata): ConnectCall {
  connectMethod ??= wireMethod<WirePluginMessage, WireHostMessage>(loadServices().RunnerGatewayService, 'Connect');
  return client.makeBidiStreamRequest(connectMethod.path, connectMethod.serialize, connectMethod.deserialize, metadata);
}
let connectMethod: WireMethod<WirePluginMessage, WireHostMessage> | undefined;

/**
 * A decoded message (Structs already converted to JSON, json.ts) as the SDK type of that message
 * (types.ts, host-api.ts): the one place the SDK takes the wire's shape on trust. proto-loader
 * decoded the bytes against the .proto these types are written from (docs/runner-sdk.md), with
 * LOADER_OPTIONS (defaults set, enums as names, int64 as numbers), so each declared field holds
 * its declared JSON type. Not re-checked field by field: every host-API answer and run context
 * would pay a second walk (docs/runner-sdk.md#performance).
 */
export function decodedAs<T extends object>(message: object): T {
  return message as T;
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
