import { Inject, Injectable, Logger, type BeforeApplicationShutdown } from '@nestjs/common';
import type { ServerResponse } from 'node:http';
import type { FastifyReply } from 'fastify';
import type { AuthenticatedRequest } from '@libs/auth';
import { APP_CONFIG, type AppConfig } from '@libs/config';
import { DomainError } from '@libs/protocol';
import { RunsQueryService } from '@libs/runs';
import { StreamSlots } from './stream-slots';

/** Resume position of an SSE request: `?after=` wins, else a numeric Last-Event-ID, else 0. */
export function resumeAfter(after: number | undefined, lastEventId: string | undefined): number {
  const fromHeader = lastEventId !== undefined && /^\d+$/.test(lastEventId.trim()) ? Number(lastEventId) : undefined;
  if (lastEventId !== undefined && fromHeader === undefined) {
    throw new DomainError('invalid_argument', 'Last-Event-ID: must be a delivery op sequence number', {
      field: 'Last-Event-ID',
    });
  }
  return after ?? fromHeader ?? 0;
}

/**
 * The delivery SSE responses of the HTTP API (GET /v1/runs/{id}/deliveries and POST /v1/events
 * with `Accept: text/event-stream`): stream slots per API key, the raw response, and the end of
 * every open stream at shutdown (readers resume with Last-Event-ID).
 */
@Injectable()
export class DeliveryStreams implements BeforeApplicationShutdown {
  private readonly logger = new Logger('DeliveryStreams');
  private readonly slots: StreamSlots;
  private readonly open = new Set<ServerResponse>();

  constructor(
    private readonly runs: RunsQueryService,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {
    this.slots = new StreamSlots(config.sse.maxStreamsPerKey);
  }

  /**
   * Streams the run's delivery ops after `after` to the reply; `preamble` (complete SSE frames)
   * is written first. Resolves when the stream is over.
   */
  async serve(
    runId: string,
    after: number,
    req: AuthenticatedRequest,
    reply: FastifyReply,
    preamble = '',
    status = 200,
  ): Promise<void> {
    const release = this.slots.take(req.principal?.key_id ?? 'anonymous');
    // From here on the raw response is ours: Fastify must not answer it too.
    reply.hijack();
    const res = reply.raw;
    res.writeHead(status, {
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
    const end = await this.runs
      .deliveries(runId, after, res, {
        maxBacklogBytes: this.config.sse.maxBacklogBytes,
        keepAliveMs: this.config.sse.keepAliveMs,
      })
      .finally(() => {
        release();
        this.open.delete(res);
      });
    if (end === 'cut') {
      this.logger.warn({
        run_id: runId,
        msg: 'delivery SSE reader disconnected: unsent backlog over SSE_MAX_BACKLOG_BYTES',
      });
    } else if (end === 'failed') {
      this.logger.error({ run_id: runId, msg: 'delivery SSE replay failed' });
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
