import type * as http2 from 'node:http2';
import * as grpc from '@grpc/grpc-js';
import { http2StreamOfHandlerCall } from './half-open';

/** How a batch waits for the rest of its tick: a microtask (the default) or the next loop turn. */
export type TickSchedule = (flush: () => void) => void;

/** What a Connect stream's adapter does with a call: its messages, then one status. */
export interface TickWriter<T> {
  /** Queues one message; the tick's messages go to the HTTP/2 stream as one write. */
  readonly send: (message: T) => void;
  /** Writes what is queued, then ends the call with this error's status (once, if still open). */
  readonly fail: (error: object) => void;
  /** Writes what is queued, then ends the call OK (once, if still open). */
  readonly end: () => void;
  /** The call was cancelled: what is queued is dropped, nothing more is written. */
  readonly closed: () => void;
  /** False when the call is written message by message with `call.write` (the fallback). */
  readonly batched: boolean;
}

/**
 * The grpc-js server call behind a handler's stream, as far as the tick writer uses it: private
 * fields of grpc-js's BaseServerInterceptingCall (server-interceptors.js, 1.14), no public API
 * exposes them.
 *
 * - `stream`: the call's node:http2 ServerHttp2Stream, where grpc-js's `sendMessage` writes each
 *   framed message (one `stream.write` per message, hence one DATA frame and, under load, one
 *   socket write per message: docs/benchmarks.md "Connect writes of a tick as one HTTP/2 write").
 * - `serializeMessage(value)`: the method's serializer plus the 5-byte gRPC frame header, exactly
 *   what `sendMessage` writes.
 * - `maxSendMessageSize`: the server's `grpc.max_send_message_length` (-1: no limit), which
 *   `sendMessage` checks against the framed length minus 5.
 *
 * Detected once per call, at creation (detectBatching); any of them missing or of another type
 * (another grpc-js, or an interceptor in front of the call) and the call is written with plain
 * `call.write`, message by message, as before.
 */
interface BatchableCall {
  readonly stream: http2.ServerHttp2Stream;
  readonly serializeMessage: (value: unknown) => Buffer;
  readonly maxSendMessageSize: number;
}

/** The call's BatchableCall fields, or null (write with `call.write`) when any is missing. */
export function detectBatching(call: object): BatchableCall | null {
  let stream: http2.ServerHttp2Stream;
  try {
    stream = http2StreamOfHandlerCall(call);
  } catch {
    return null;
  }
  const inner = (call as { call?: unknown }).call as Record<string, unknown>;
  const serializeMessage = inner.serializeMessage;
  const maxSendMessageSize = inner.maxSendMessageSize;
  if (typeof serializeMessage !== 'function' || typeof maxSendMessageSize !== 'number') {
    return null;
  }
  return {
    stream,
    serializeMessage: (value) => serializeMessage.call(inner, value) as Buffer,
    maxSendMessageSize,
  };
}

/** grpc-js's own details for a response it cannot serialize (server-interceptors.js sendMessage). */
function serializeErrorDetails(e: unknown): string {
  return process.env.GRPC_NODE_DEBUG_SEND_ERROR_DETAILS === 'true'
    ? `Error serializing response: ${e instanceof Error ? e.message : String(e)}`
    : 'Error serializing response';
}

/**
 * Writes a server call's outbound messages a tick at a time: the messages sent to the call within
 * one tick go to its HTTP/2 stream as ONE write of their concatenated gRPC frames (one DATA frame
 * and one socket write where grpc-js's `call.write` makes one per message; docs/benchmarks.md
 * "Connect writes of a tick as one HTTP/2 write (round 12, wt-c64cpu)").
 *
 * Each message is serialized and size-checked when it is sent, by grpc-js's own serializer and
 * against its own limit: one that cannot be serialized ends the call INTERNAL, one over the limit
 * RESOURCE_EXHAUSTED with grpc-js's details, after the messages sent before it. Backpressure as in
 * grpc-js, which waits for each message's write to complete before the next: one write at a time is
 * in the HTTP/2 stream, and what is sent meanwhile waits and goes as the next write. `end` and
 * `fail` write what waits first (the HTTP/2 stream keeps its writes in order), so the status always
 * follows every message sent before it. The call's response headers go first, through the public
 * `call.sendMetadata`, as grpc-js sends them before a call's first message.
 */
export function tickWriter<T>(
  call: grpc.ServerDuplexStream<unknown, T>,
  schedule: TickSchedule = queueMicrotask,
): TickWriter<T> {
  let open = true;
  const batching = detectBatching(call);
  if (!batching) {
    return {
      batched: false,
      send: (message) => {
        if (open) {
          call.write(message);
        }
      },
      fail: (error) => {
        if (open) {
          open = false;
          // grpc-js takes an emitted error's code, details and metadata as the call's status.
          call.emit('error', error);
        }
      },
      end: () => {
        if (open) {
          open = false;
          call.end();
        }
      },
      closed: () => {
        open = false;
      },
    };
  }

  const { stream, serializeMessage, maxSendMessageSize } = batching;
  let queued: Buffer[] = [];
  let scheduled = false;
  let inFlight = false;
  let headersSent = false;

  /** Whether the HTTP/2 stream still takes writes (grpc-js's checkCancelled, plus its end). */
  const writable = () => !stream.destroyed && !stream.closed && !stream.writableEnded;

  const writeQueued = () => {
    if (queued.length === 0 || !writable()) {
      queued = [];
      return;
    }
    if (!headersSent) {
      headersSent = true;
      call.sendMetadata(new grpc.Metadata());
    }
    const data = queued.length === 1 ? queued[0] : Buffer.concat(queued);
    queued = [];
    inFlight = true;
    stream.write(data, (error) => {
      inFlight = false;
      if (error) {
        // As grpc-js does for a failed message write.
        failWith({ code: grpc.status.INTERNAL, details: 'Internal server error' });
        return;
      }
      if (open && queued.length > 0 && !scheduled) {
        writeQueued();
      }
    });
  };

  const flush = () => {
    scheduled = false;
    if (!inFlight) {
      writeQueued();
    }
  };

  const failWith = (error: object) => {
    if (open) {
      open = false;
      writeQueued();
      call.emit('error', error);
    }
  };

  return {
    batched: true,
    send: (message) => {
      if (!open) {
        return;
      }
      let framed: Buffer;
      try {
        framed = serializeMessage(message);
        if (!Buffer.isBuffer(framed)) {
          throw new TypeError('grpc-js serializeMessage returned no Buffer');
        }
      } catch (e) {
        failWith({ code: grpc.status.INTERNAL, details: serializeErrorDetails(e) });
        return;
      }
      if (maxSendMessageSize !== -1 && framed.length - 5 > maxSendMessageSize) {
        failWith({
          code: grpc.status.RESOURCE_EXHAUSTED,
          details: `Sent message larger than max (${framed.length} vs. ${maxSendMessageSize})`,
        });
        return;
      }
      queued.push(framed);
      if (!scheduled) {
        scheduled = true;
        schedule(flush);
      }
    },
    fail: failWith,
    end: () => {
      if (open) {
        open = false;
        writeQueued();
        call.end();
      }
    },
    closed: () => {
      open = false;
      queued = [];
    },
  };
}
