import { Inject, Injectable, Logger, type BeforeApplicationShutdown } from '@nestjs/common';
import type { ServerResponse } from 'node:http';
import type { FastifyReply } from 'fastify';
import type { AuthenticatedRequest } from '@libs/auth';
import { APP_CONFIG, type AppConfig } from '@libs/config';
import { DomainError } from '@libs/protocol';
import { RunsQueryService, type RunStreamKind } from '@libs/runs';
import { telemetry } from '@libs/telemetry';
import { INT32_MAX } from './dto/rules';
import { StreamSlots } from './stream-slots';

const ITEM: Record<RunStreamKind, string> = { results: 'result', deliveries: 'delivery op' };

/** Resume position of an SSE request: `?after=` wins, else a numeric Last-Event-ID, else 0. */
export function resumeAfter(kind: RunStreamKind, after: number | undefined, lastEventId: string | undefined): number {
  const trimmed = lastEventId?.trim();
  const fromHeader =
    trimmed !== undefined && /^\d{1,10}$/.test(trimmed) && Number(trimmed) <= INT32_MAX ? Number(trimmed) : undefined;
  if (lastEventId !== undefined && fromHeader === undefined) {
    throw new DomainError(
      'invalid_argument',
      `Last-Event-ID: must be a ${ITEM[kind]} sequence number (an integer from 0 to ${INT32_MAX})`,
      { field: 'Last-Event-ID' },
    );
  }
  return after ?? fromHeader ?? 0;
}

/**
 * Every SSE response of the HTTP API (GET /v1/runs/{id}/events, GET /v1/runs/{id}/deliveries,
 * POST /v1/events with `Accept: text/event-stream`): one bound of open streams per API key across
 * all of them, the raw response, and the end of every open stream at shutdown (readers resume
 * with Last-Event-ID; the server could not close while they are open).
 */
@Injectable()
export class SseStreams implements BeforeApplicationShutdown {
  private readonly logger = new Logger('SSE');
  private readonly slots: StreamSlots;
  private readonly open = new Set<ServerResponse>();

  constructor(
    private readonly runs: RunsQueryService,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {
    this.slots = new StreamSlots(config.sse.maxStreamsPerKey);
    telemetry.sample('sse_readers', () => this.open.size);
  }

  /**
   * Streams the run's results or delivery ops after `after` to the reply; `preamble` (complete
   * SSE frames) is written first. Resolves when the stream is over. A resume at the end of a
   * finished run's stream answers 204: EventSource reconnects after every end of stream, and 204
   * is the one answer that stops it.
   */
  async serve(
    kind: RunStreamKind,
    runId: string,
    after: number,
    req: AuthenticatedRequest,
    reply: FastifyReply,
    preamble = '',
  ): Promise<void> {
    if (after > 0 && (await this.runs.streamIsOver(kind, runId, after))) {
      void reply.code(204).send();
      return;
    }
    const release = this.slots.take(req.principal?.key_id ?? 'anonymous');
    // From here on the raw response is ours: Fastify must not answer it too.
    reply.hijack();
    const res = reply.raw;
    res.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache, no-transform',
      connection: 'keep-alive',
      'x-accel-buffering': 'no',
    });
    if (preamble !== '') {
      res.write(preamble);
    }
    res.flushHeaders();
    this.open.add(res);
    telemetry.sseOpened();
    const limits = { maxBacklogBytes: this.config.sse.maxBacklogBytes, keepAliveMs: this.config.sse.keepAliveMs };
    const streamed =
      kind === 'results'
        ? this.runs.stream(runId, after, res, limits)
        : this.runs.deliveries(runId, after, res, limits);
    const end = await streamed.finally(() => {
      release();
      this.open.delete(res);
    });
    const what = kind === 'results' ? 'SSE' : 'delivery SSE';
    if (end === 'cut') {
      telemetry.sseCut();
      this.logger.warn({
        run_id: runId,
        msg: `${what} reader disconnected: unsent backlog over SSE_MAX_BACKLOG_BYTES`,
      });
    } else if (end === 'failed') {
      this.logger.error({ run_id: runId, msg: `${what} replay failed` });
      res.destroy();
    }
  }

  beforeApplicationShutdown(): void {
    for (const res of this.open) {
      res.destroy();
    }
    this.open.clear();
  }
}
