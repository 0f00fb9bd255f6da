import * as path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { Host, TestDatabase } from './harness';

jest.setTimeout(60_000);

/*
 * gRPC server reflection on the gRPC port, used the way grpcurl uses it (grpcurl is not packaged
 * for this Debian): a client that knows only grpc.reflection.v1 lists the services, fetches the
 * file descriptors of one, builds its client from them and calls it — health, and a host-API
 * call (refused without a plugin token, as it should be).
 */

const REFLECTION_PROTO = path.join(
  path.dirname(require.resolve('@grpc/reflection/package.json')),
  'build/proto/grpc/reflection/v1/reflection.proto',
);
const reflectionPkg = grpc.loadPackageDefinition(
  protoLoader.loadSync(REFLECTION_PROTO, {
    keepCase: true,
    longs: Number,
    enums: String,
    defaults: true,
    oneofs: true,
  }),
) as any;

interface ReflectionAnswer {
  list_services_response?: { service: { name: string }[] };
  file_descriptor_response?: { file_descriptor_proto: Buffer[] };
  error_response?: { error_code: number; error_message: string };
}

/** One request on the reflection stream, its one answer. */
function reflect(address: string, request: Record<string, unknown>): Promise<ReflectionAnswer> {
  const client = new reflectionPkg.grpc.reflection.v1.ServerReflection(address, grpc.credentials.createInsecure());
  return new Promise((resolve, reject) => {
    const call = client.ServerReflectionInfo();
    call.on('data', (answer: ReflectionAnswer) => {
      resolve(answer);
      call.end();
    });
    call.on('error', reject);
    call.on('end', () => client.close());
    call.write(request);
  });
}

/** A FileDescriptorSet (field 1, repeated) from the FileDescriptorProto bytes reflection returned. */
function descriptorSet(files: Buffer[]): Buffer {
  const parts: Buffer[] = [];
  for (const f of files) {
    const len: number[] = [];
    let n = f.length;
    do {
      len.push((n & 0x7f) | (n > 0x7f ? 0x80 : 0));
      n >>>= 7;
    } while (n > 0);
    parts.push(Buffer.from([0x0a, ...len]), f);
  }
  return Buffer.concat(parts);
}

async function reflectedPackage(address: string, symbol: string): Promise<any> {
  const answer = await reflect(address, { file_containing_symbol: symbol });
  expect(answer.error_response).toBeUndefined();
  const files = answer.file_descriptor_response!.file_descriptor_proto;
  expect(files.length).toBeGreaterThan(0);
  const def = protoLoader.loadFileDescriptorSetFromBuffer(descriptorSet(files), {
    keepCase: true,
    longs: Number,
    enums: String,
    defaults: true,
  });
  return grpc.loadPackageDefinition(def);
}

describe('gRPC server reflection', () => {
  const db = new TestDatabase();
  const host = new Host(db);

  beforeAll(() => host.start());
  afterAll(async () => {
    await host.stop();
    await db.drop();
  });

  it('lists the services', async () => {
    const answer = await reflect(host.grpc, { list_services: '' });
    const names = answer.list_services_response!.service.map((s) => s.name).sort();
    // (@grpc/reflection does not list itself; it answers on grpc.reflection.v1 and v1alpha.)
    expect(names).toEqual([
      'grpc.health.v1.Health',
      'runnerhost.v1.HostApiService',
      'runnerhost.v1.RunnerGatewayService',
    ]);
  });

  it('describes a service and the client built from the descriptors calls it', async () => {
    const pkg = await reflectedPackage(host.grpc, 'runnerhost.v1.HostApiService');
    const service = pkg.runnerhost.v1.HostApiService;
    expect(Object.keys(service.service)).toEqual(expect.arrayContaining(['StateGet', 'InvokeModel', 'SteeringPull']));
    const client = new service(host.grpc, grpc.credentials.createInsecure());
    const err = await new Promise<grpc.ServiceError>((resolve) =>
      client.StateGet({ run_id: 'r1', scope: 'conversation', key: 'k' }, (e: grpc.ServiceError) => resolve(e)),
    );
    client.close();
    expect(err.code).toBe(grpc.status.UNAUTHENTICATED);

    const health = await reflectedPackage(host.grpc, 'grpc.health.v1.Health');
    const hc = new health.grpc.health.v1.Health(host.grpc, grpc.credentials.createInsecure());
    const status = await new Promise<any>((resolve, reject) =>
      hc.Check({ service: '' }, (e: Error | null, r: unknown) => (e ? reject(e) : resolve(r))),
    );
    hc.close();
    expect(status.status).toBe('SERVING');
  });

  it('answers NOT_FOUND for a symbol it does not know', async () => {
    const answer = await reflect(host.grpc, { file_containing_symbol: 'runnerhost.v1.NoSuchService' });
    expect(answer.error_response).toMatchObject({ error_code: grpc.status.NOT_FOUND });
  });
});
