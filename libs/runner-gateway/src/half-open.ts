import * as http2 from 'node:http2';
import { Duplex } from 'node:stream';
import { Logger } from '@nestjs/common';
import type * as grpc from '@grpc/grpc-js';

/** How long a client may keep its half of a stream open after the host sent the call's status. */
export const HALF_OPEN_GRACE_MS = 1000;

/**
 * After the host has sent a call's status, the call is over; a client that still keeps its half
 * of the HTTP/2 stream open (a raw client that never ends its request, e.g. a Connect stream
 * closed for "no hello within 10 s") is asked to stop with RST_STREAM NO_ERROR, as HTTP/2 allows
 * a server that has sent a complete response (RFC 9113 §8.1; docs/protocol.md#wire-conventions). grpc-js
 * clients end their half when the status arrives, so they never see it. Armed once per call by
 * the Connect handler itself (connect.grpc.ts), when the host's half of the stream finishes —
 * whoever sent the status (the session, or grpc-js for a message over the size limit) — so no
 * layer wraps the call's messages. Without the HTTP/2 stream (another grpc-js: see
 * http2StreamOfHandlerCall) the reset is not done and the host logs so once, as an error.
 */
export function resetWhenHalfOpen(call: grpc.ServerDuplexStream<unknown, unknown>): void {
  const stream = streamOrWarn(call);
  stream?.once('finish', () => {
    setTimeout(() => {
      if (!stream.closed && !stream.destroyed) {
        stream.close(http2.constants.NGHTTP2_NO_ERROR);
      }
    }, HALF_OPEN_GRACE_MS).unref();
  });
}

/**
 * The HTTP/2 stream of a grpc-js handler's call: grpc-js keeps it in private fields (the
 * handler's stream holds the server call in `call`, the call the HTTP/2 stream in `stream`; no
 * public API exposes it). Throws when a grpc-js release no longer has them, so the change is seen.
 */
export function http2StreamOfHandlerCall(call: object): http2.ServerHttp2Stream {
  const inner: unknown = 'call' in call ? call.call : undefined;
  const stream: unknown = typeof inner === 'object' && inner !== null && 'stream' in inner ? inner.stream : undefined;
  if (!isServerHttp2Stream(stream)) {
    throw new Error('grpc-js: the handler call has no HTTP/2 `call.stream` field (grpc-js internals changed)');
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

function streamOrWarn(call: object): http2.ServerHttp2Stream | undefined {
  try {
    return http2StreamOfHandlerCall(call);
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
