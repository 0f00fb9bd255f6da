import { Inject, Injectable, Logger, type BeforeApplicationShutdown } from '@nestjs/common';
import type { ServerResponse } from 'node:http';
import type { FastifyReply } from 'fastify';
import { ApiKeysService, type AuthenticatedRequest } from '@libs/auth';
import { APP_CONFIG, type AppConfig } from '@libs/config';
import { DomainError, type RunStatus } from '@libs/protocol';
import { RunsQueryService, type RunStreamKind } from '@libs/runs';
import { ReleasingSet } from '@libs/streams';
import { telemetry } from '@libs/telemetry';
import { INT32_MAX } from './dto/rules';
import { StreamSlots } from './stream-slots';
import { SseWriter } from './sse-writer';

const ANONYMOUS = 'anonymous';
/** How often open streams' keys are checked for a revocation made by another process. */
const REVOKED_KEY_SWEEP_MS = 10_000;

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
  /**
   * Open streams and the API key each was opened with (directly or through a stream token it
   * minted): a ReleasingSet, so an ended stream's response is not kept for the young-generation GC
   * (libs/streams releasing-map.ts).
   */
  private readonly open = new ReleasingSet<{ res: ServerResponse; keyId: string }>();
  private readonly unsubscribe: () => void;
  private readonly sweep: NodeJS.Timeout;

  constructor(
    private readonly runs: RunsQueryService,
    private readonly keys: ApiKeysService,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {
    this.slots = new StreamSlots(config.sse.maxStreamsPerKey);
    // A revoked key's open streams end: at once for a revocation in this process, and within
    // REVOKED_KEY_SWEEP_MS for one made by another process on the same database.
    this.unsubscribe = keys.onRevoked((keyId) => this.endStreamsOf(keyId));
    this.sweep = setInterval(() => void this.endStreamsOfRevokedKeys(), REVOKED_KEY_SWEEP_MS);
    this.sweep.unref();
  }

  /** Ends every open stream of the key (the reader sees the connection end; reopening answers 401). */
  private endStreamsOf(keyId: string): void {
    for (const [member, { res, keyId: key }] of this.open.entries()) {
      if (key === keyId) {
        this.open.delete(member);
        res.destroy();
      }
    }
  }

  private async endStreamsOfRevokedKeys(): Promise<void> {
    for (const keyId of new Set([...this.open].map((s) => s.keyId))) {
      try {
        if (keyId !== ANONYMOUS && !(await this.keys.isActive(keyId))) {
          this.logger.log({ msg: `ending the event streams of revoked API key ${keyId}` });
          this.endStreamsOf(keyId);
        }
      } catch (e) {
        this.logger.warn({ msg: `checking API key ${keyId} of open event streams: ${String(e)}` });
      }
    }
    telemetry.sample('sse_readers', () => this.open.size);
  }

  /**
   * Streams the run's results or delivery ops after `after` to the reply; `preamble` (complete
   * SSE frames) is written first. Resolves when the stream is over. A resume at the end of a
   * finished run's stream answers 204: EventSource reconnects after every end of stream, and 204
   * is the one answer that stops it. `known`: the run's status as the route read it
   * (RunsQueryService.existingStatus), so that a terminal one is not read again.
   */
  async serve(
    kind: RunStreamKind,
    runId: string,
    after: number,
    req: AuthenticatedRequest,
    reply: FastifyReply,
    preamble = '',
    known?: RunStatus,
  ): Promise<void> {
    if (after > 0 && (await this.runs.streamIsOver(kind, runId, after, known))) {
      void reply.code(204).send();
      return;
    }
    const keyId = req.principal?.key_id ?? ANONYMOUS;
    const release = this.slots.take(keyId);
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
    // The head leaves with the first replayed frames (SseWriter calls this after its first page).
    const sendHeaders = () => {
      if (!res.headersSent) {
        res.flushHeaders();
      }
    };
    const member = this.open.add({ res, keyId });
    telemetry.sseOpened();
    const limits = {
      maxBacklogBytes: this.config.sse.maxBacklogBytes,
      keepAliveMs: this.config.sse.keepAliveMs,
      flushIntervalMs: this.config.sse.flushIntervalMs,
    };
    const streamed =
      kind === 'results'
        ? this.runs
            .results(runId, after, known)
            .then((source) => new SseWriter(res, after, source, limits, sendHeaders).run())
        : this.runs
            .deliveryOps(runId, after, known)
            .then((source) => new SseWriter(res, after, source, limits, sendHeaders).run());
    const end = await streamed.finally(() => {
      sendHeaders();
      release();
      this.open.delete(member);
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
    this.unsubscribe();
    clearInterval(this.sweep);
    for (const { res } of this.open) {
      res.destroy();
    }
    this.open.clear();
  }
}
