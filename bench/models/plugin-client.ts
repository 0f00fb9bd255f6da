import * as grpc from '@grpc/grpc-js';
import { fromStruct, toStruct, type JsonObject, type Struct } from '../dispatch/raw-runner/struct';
import { loadProtos } from '../common/proto';

/*
 * A hand-driven runner plugin in the bench process: one Connect stream (hello with a manifest
 * that asks for model permissions; receives the run), and the run-scoped HostApiService client
 * the measured StreamModel and CountTokens calls go through. Same loader options as the host.
 */

const pkg = loadProtos(['runnerhost/v1/gateway.proto', 'runnerhost/v1/host_api.proto']) as unknown as {
  runnerhost: {
    v1: { RunnerGatewayService: grpc.ServiceClientConstructor; HostApiService: grpc.ServiceClientConstructor };
  };
};

interface HostMessage {
  welcome?: unknown;
  run?: { context: { run_id: string } };
  ping?: { nonce: number };
}

/** One StreamModel item as it arrives: a MessageChunk or the final usage. */
export interface StreamItem {
  chunk: Struct | null;
  usage: Struct | null;
}

export class BenchPlugin {
  private readonly gateway: grpc.Client;
  private readonly api: grpc.Client;
  private readonly connect: grpc.ClientDuplexStream<unknown, HostMessage>;
  private readonly waiting: ((m: HostMessage) => void)[] = [];
  private readonly queued: HostMessage[] = [];

  constructor(
    address: string,
    private readonly token: string,
  ) {
    const options = { 'grpc.enable_retries': 0, 'grpc.max_receive_message_length': 64 * 1024 * 1024 };
    this.gateway = new pkg.runnerhost.v1.RunnerGatewayService(address, grpc.credentials.createInsecure(), options);
    this.api = new pkg.runnerhost.v1.HostApiService(address, grpc.credentials.createInsecure(), options);
    const gateway = this.gateway as unknown as {
      Connect(md: grpc.Metadata): grpc.ClientDuplexStream<unknown, HostMessage>;
    };
    this.connect = gateway.Connect(this.metadata());
    this.connect.on('data', (m: HostMessage) => {
      if (m.ping) {
        this.connect.write({ pong: { nonce: m.ping.nonce } });
        return;
      }
      const w = this.waiting.shift();
      if (w) {
        w(m);
      } else {
        this.queued.push(m);
      }
    });
    this.connect.on('error', () => undefined);
  }

  metadata(): grpc.Metadata {
    const md = new grpc.Metadata();
    md.set('authorization', `Bearer ${this.token}`);
    return md;
  }

  next(): Promise<HostMessage> {
    const m = this.queued.shift();
    return m ? Promise.resolve(m) : new Promise((resolve) => this.waiting.push(resolve));
  }

  async hello(author: string, name: string, manifest: JsonObject): Promise<void> {
    this.connect.write({
      hello: {
        plugin_author: author,
        plugin_name: name,
        plugin_version: '1',
        protocol_version: '1',
        manifests: [toStruct(manifest)],
      },
    });
    const m = await this.next();
    if (!m.welcome) {
      throw new Error(`expected welcome, got ${JSON.stringify(m)}`);
    }
  }

  async nextRun(): Promise<string> {
    const m = await this.next();
    if (!m.run) {
      throw new Error(`expected a run, got ${JSON.stringify(m)}`);
    }
    return m.run.context.run_id;
  }

  complete(runId: string): void {
    this.connect.write({
      result: { run_id: runId, type: 'run.completed', data: toStruct({ finish_reason: 'stop' }), sequence: 1 },
    });
  }

  /** StreamModel: `onItem` sees every item as it arrives; resolves at the end of the stream. */
  streamModel(request: Record<string, unknown>, onItem: (item: StreamItem) => void): Promise<void> {
    return new Promise((resolve, reject) => {
      const call = (
        this.api as unknown as Record<string, (r: unknown, md: grpc.Metadata) => grpc.ClientReadableStream<StreamItem>>
      ).StreamModel.call(this.api, request, this.metadata());
      call.on('data', onItem);
      call.on('error', reject);
      call.on('end', resolve);
    });
  }

  unary<T>(method: string, request: Record<string, unknown>): Promise<T> {
    return new Promise((resolve, reject) => {
      const fn = (
        this.api as unknown as Record<
          string,
          (r: unknown, md: grpc.Metadata, cb: (e: Error | null, res: T) => void) => void
        >
      )[method];
      fn.call(this.api, request, this.metadata(), (e: Error | null, res: T) => (e ? reject(e) : resolve(res)));
    });
  }

  close(): void {
    this.connect.end();
    this.gateway.close();
    this.api.close();
  }
}

export { fromStruct, toStruct };
