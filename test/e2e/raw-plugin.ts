import * as path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';

// A hand-driven runner plugin for tests: plain proto-loader on the .proto files (no code shared
// with the host); the test decides every message it sends.

const PROTO = path.resolve(__dirname, '..', '..', 'proto');
const def = protoLoader.loadSync(['runnerhost/v1/gateway.proto', 'runnerhost/v1/host_api.proto'], {
  includeDirs: [PROTO],
  keepCase: true,
  longs: Number,
  enums: String,
  defaults: true,
  oneofs: true,
});
export const rawPkg = grpc.loadPackageDefinition(def) as any;

// google.protobuf.Struct / Value in protobufjs object form: one set of encoders for all e2e clients.
export { fromStruct, fromValue, toStruct, toValue } from './host-api-client';
import { toStruct } from './host-api-client';

/** One Connect stream driven by the test. */
export class RawPlugin {
  readonly client: any;
  readonly call: any;
  private readonly queue: any[] = [];
  private waiters: ((m: any) => void)[] = [];

  constructor(grpcAddr: string, token: string) {
    this.client = new rawPkg.runnerhost.v1.RunnerGatewayService(grpcAddr, grpc.credentials.createInsecure());
    const md = new grpc.Metadata();
    md.set('authorization', `Bearer ${token}`);
    this.call = this.client.Connect(md);
    this.call.on('data', (m: any) => {
      const w = this.waiters.shift();
      if (w) {
        w(m);
      } else {
        this.queue.push(m);
      }
    });
    this.call.on('error', () => undefined);
  }

  hello(author: string, name: string, manifests: Record<string, unknown>[]): void {
    this.call.write({
      hello: {
        plugin_author: author,
        plugin_name: name,
        plugin_version: '1',
        protocol_version: '1',
        manifests: manifests.map(toStruct),
      },
    });
  }

  /** The next host message that is not a ping. */
  async next(): Promise<any> {
    for (;;) {
      const m = this.queue.shift() ?? (await new Promise<any>((resolve) => this.waiters.push(resolve)));
      if (!m.ping) {
        return m;
      }
    }
  }

  result(runId: string, type: string, data: Record<string, unknown>, sequence?: number): void {
    this.call.write({ result: { run_id: runId, type, data: toStruct(data), ...(sequence ? { sequence } : {}) } });
  }

  close(): void {
    this.call.end();
    this.client.close();
  }
}

export function manifestFor(author: string, plugin: string, extra: Record<string, unknown> = {}) {
  return {
    id: `plugin:${author}/${plugin}/default`,
    name: 'default',
    label: { en_US: 'raw' },
    protocol_version: '1',
    capabilities: { streaming: true },
    permissions: { history: ['page', 'search'], events: ['get', 'page'], storage: ['plugin'] },
    config_schema: [],
    metadata: {},
    ...extra,
  };
}
