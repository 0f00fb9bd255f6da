import * as http2 from 'node:http2';
import { Duplex } from 'node:stream';
import { Logger } from '@nestjs/common';
import * as grpc from '@grpc/grpc-js';
import type { AppConfig } from '@libs/config';

/** How long a client may keep its half of a stream open after the host sent the call's status. */
export const HALF_OPEN_GRACE_MS = 1000;

/**
 * After the host has sent a call's status, the call is over; a client that still keeps its half
 * of the HTTP/2 stream open (a raw client that never ends its request, e.g. a Connect stream
 * closed for "no hello within 10 s") is asked to stop with RST_STREAM NO_ERROR, as HTTP/2 allows
 * a server that has sent a complete response (RFC 9113 §8.1). grpc-js clients end their half
 * when the status arrives, so they never see it. grpc-js keeps the HTTP/2 stream on its base call
 * and has no public way to reset it: `http2StreamOf` below reads it. Without that field (another
 * grpc-js) the reset is not done and the host logs so once, as an error.
 */
export const resetHalfOpenStreams: grpc.ServerInterceptor = (method, call) => {
  // Only client-streaming calls (Connect) answer while the request may still be open: a unary
  // call's status follows its whole request, so the host-API path carries no timer per call, and
  // no layer either: its call is grpc-js's own, as it came (an intercepting layer that forwards
  // everything cost every host API call its objects and closures: docs/benchmarks.md#host-api).
  if (!method.requestStream) {
    return call as grpc.ServerInterceptingCall;
  }
  const stream = streamOrWarn(call);
  return new grpc.ServerInterceptingCall(call, {
    sendStatus: (status, next) => {
      next(status);
      if (stream) {
        setTimeout(() => {
          if (!stream.closed && !stream.destroyed) {
            stream.close(http2.constants.NGHTTP2_NO_ERROR);
          }
        }, HALF_OPEN_GRACE_MS).unref();
      }
    },
  });
};

/**
 * The HTTP/2 stream of a server call: the private `stream` field of grpc-js's base call (no public
 * API exposes it). Throws when a grpc-js release no longer has it, so the change is seen.
 */
export function http2StreamOf(call: grpc.ServerInterceptingCallInterface): http2.ServerHttp2Stream {
  const stream: unknown = 'stream' in call ? call.stream : undefined;
  if (!isServerHttp2Stream(stream)) {
    throw new Error('grpc-js: the server call has no HTTP/2 `stream` field (grpc-js internals changed)');
  }
  return stream;
}

function isServerHttp2Stream(v: unknown): v is http2.ServerHttp2Stream {
  return (
    v instanceof Duplex &&
    'respond' in v &&
    typeof v.respond === 'function' &&
    'close' in v &&
    typeof v.close === 'function' &&
    'closed' in v &&
    typeof v.closed === 'boolean'
  );
}

const logger = new Logger('GrpcStreams');
let warned = false;

function streamOrWarn(call: grpc.ServerInterceptingCallInterface): http2.ServerHttp2Stream | undefined {
  try {
    return http2StreamOf(call);
  } catch (e) {
    if (!warned) {
      warned = true;
      logger.error(
        `${e instanceof Error ? e.message : String(e)}: half-open Connect streams will not be reset after their status`,
      );
    }
    return undefined;
  }
}

/**
 * gRPC server options beyond Nest's: a bound on concurrent streams per connection (grpc-js
 * advertises unlimited by default) and the half-open stream reset above.
 */
export function grpcServerOptions(config: AppConfig): Record<string, unknown> {
  return {
    'grpc.max_concurrent_streams': config.grpc.maxConcurrentStreams,
    interceptors: [resetHalfOpenStreams],
  };
}
