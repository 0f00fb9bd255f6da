import type * as grpc from '@grpc/grpc-js';

/** What grpc-js keeps per bound address (private in its typings; checked at run time). */
interface BoundPortShape {
  portNumber?: unknown;
}

/**
 * The port the gRPC server is bound on, or null when it cannot be read. Nest binds the server
 * itself and drops the port `bindAsync` reported, and grpc-js has no public getter, so this reads
 * grpc-js's bound-port table (`boundPorts`, 1.x), checking its shape: a grpc-js upgrade that
 * changes it fails `grpc-bound-port.spec.ts` rather than advertising a wrong port. The host binds
 * one address (GRPC_HOST:GRPC_PORT), so one port is expected; anything else is null.
 */
export function boundGrpcPort(server: grpc.Server): number | null {
  const table: unknown = Reflect.get(server, 'boundPorts');
  if (!(table instanceof Map)) {
    return null;
  }
  const ports = new Set<number>();
  for (const bound of (table as Map<unknown, BoundPortShape | undefined>).values()) {
    const port = bound?.portNumber;
    if (typeof port === 'number' && Number.isInteger(port) && port > 0) {
      ports.add(port);
    }
  }
  return ports.size === 1 ? [...ports][0] : null;
}
