import { Injectable, type CallHandler, type ExecutionContext, type NestInterceptor } from '@nestjs/common';
import type { PackageDefinition, ServiceDefinition } from '@grpc/proto-loader';
import type { Observable } from 'rxjs';
import { DomainError } from '@libs/protocol';

/**
 * grpc-js answers a request it cannot deserialize with INTERNAL (and no `x-error-code`), as if the
 * host had failed. A malformed request is the caller's fault: INVALID_ARGUMENT. So the request
 * deserializers never throw; they hand the handler a marker instead, which the Connect session
 * and MalformedRequestInterceptor turn into the protocol error.
 */
const MALFORMED = Symbol('malformed protobuf request');

export interface MalformedRequest {
  readonly [MALFORMED]: { message_type: string; reason: string };
}

const WIRE_BYTES = Symbol('request size on the wire');

/** The size of a request as it came over the wire (set by the tolerant deserializer), if known. */
export function wireBytes(value: object): number | undefined {
  return (value as { [WIRE_BYTES]?: number })[WIRE_BYTES];
}

export function isMalformed(value: unknown): value is MalformedRequest {
  return typeof value === 'object' && value !== null && MALFORMED in value;
}

/** The protocol error for a malformed request, naming the message type. */
export function malformedError(request: MalformedRequest): DomainError {
  const { message_type, reason } = request[MALFORMED];
  return new DomainError('invalid_argument', `request: not a valid ${message_type} message (${reason})`, {
    field: 'request',
  });
}

function isService(definition: PackageDefinition[string]): definition is ServiceDefinition {
  return !('format' in definition);
}

/**
 * Makes every request deserializer of the package tolerant (see MALFORMED). Passed to the Nest
 * gRPC server as `onLoadPackageDefinition`, which runs before the services are registered.
 */
export function tolerateMalformedRequests(definition: PackageDefinition): void {
  for (const service of Object.values(definition)) {
    if (!isService(service)) {
      continue;
    }
    for (const method of Object.values(service)) {
      const deserialize = method.requestDeserialize;
      const messageType = method.path.split('/').pop() ?? method.path;
      method.requestDeserialize = (bytes: Buffer) => {
        try {
          const request = deserialize(bytes);
          // The guard's payload limit is about these bytes; measuring them again would cost an encode.
          Object.defineProperty(request, WIRE_BYTES, { value: bytes.length });
          return request;
        } catch (e) {
          const reason = e instanceof Error ? e.message.slice(0, 200) : 'undecodable';
          const marker: MalformedRequest = { [MALFORMED]: { message_type: `${messageType} request`, reason } };
          return marker;
        }
      };
    }
  }
}

/** Refuses a unary or server-streaming call whose request could not be decoded (health checks). */
@Injectable()
export class MalformedRequestInterceptor implements NestInterceptor {
  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    const request: unknown = context.switchToRpc().getData();
    if (isMalformed(request)) {
      throw malformedError(request);
    }
    return next.handle();
  }
}
