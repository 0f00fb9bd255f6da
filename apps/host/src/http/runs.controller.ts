import {
  Body,
  Controller,
  Get,
  Headers,
  HttpCode,
  Inject,
  Logger,
  Param,
  ParseUUIDPipe,
  Post,
  Query,
  Req,
  Res,
} from '@nestjs/common';
import { ApiBearerAuth, ApiOperation, ApiResponse, ApiTags } from '@nestjs/swagger';
import type { ServerResponse } from 'node:http';
import type { BeforeApplicationShutdown } from '@nestjs/common';
import type { FastifyReply } from 'fastify';
import { Roles, StreamTokensService, type AuthenticatedRequest } from '@libs/auth';
import { APP_CONFIG, type AppConfig } from '@libs/config';
import { DomainError, type RunStatus } from '@libs/protocol';
import { RunsQueryService } from '@libs/runs';
import { ErrorResponseDto } from './dto/error.dto';
import { StreamSlots } from './stream-slots';
import { EventStreamRoute } from './event-stream-route';
import {
  CancelRunDto,
  ListRunsQueryDto,
  RunDto,
  RunEventFrameDto,
  RunEventsQueryDto,
  RunPageDto,
  StreamTokenDto,
} from './dto/run.dto';

const uuid = new ParseUUIDPipe({
  exceptionFactory: () => new DomainError('invalid_argument', 'run_id: must be a UUID', { field: 'run_id' }),
});

@ApiTags('runs')
@ApiBearerAuth()
@Roles('platform', 'admin')
@Controller('v1/runs')
export class RunsController implements BeforeApplicationShutdown {
  private readonly logger = new Logger('RunEvents');
  private readonly slots: StreamSlots;
  /** Open SSE responses: the server cannot close while they are open. */
  private readonly open = new Set<ServerResponse>();

  constructor(
    private readonly runs: RunsQueryService,
    private readonly streamTokens: StreamTokensService,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {
    this.slots = new StreamSlots(config.sse.maxStreamsPerKey);
  }

  @Get()
  @ApiOperation({ summary: 'List runs, newest first, cursor-paged' })
  @ApiResponse({ status: 200, type: RunPageDto })
  async list(@Query() q: ListRunsQueryDto): Promise<RunPageDto> {
    return this.runs.list(
      { conversation_id: q.conversation_id, agent_id: q.agent_id, status: q.status as RunStatus[] | undefined },
      q.cursor ?? null,
      q.limit ?? 50,
    );
  }

  @Get(':run_id')
  @ApiOperation({ summary: 'A run: status, runner, timings, usage' })
  @ApiResponse({ status: 200, type: RunDto })
  @ApiResponse({ status: 404, type: ErrorResponseDto })
  async get(@Param('run_id', uuid) runId: string): Promise<RunDto> {
    return this.runs.get(runId);
  }

  @Post(':run_id/cancel')
  @HttpCode(200)
  @ApiOperation({ summary: 'Cancel a run: the runner is told, given a grace period, then the run is cancelled' })
  @ApiResponse({ status: 200, type: RunDto })
  @ApiResponse({ status: 404, type: ErrorResponseDto })
  @ApiResponse({ status: 409, type: ErrorResponseDto, description: 'The run already ended' })
  async cancel(@Param('run_id', uuid) runId: string, @Body() body: CancelRunDto): Promise<RunDto> {
    return this.runs.cancel(runId, body.reason ?? 'cancelled by request');
  }

  @Post(':run_id/stream-tokens')
  @HttpCode(201)
  @ApiOperation({
    summary: "Mint a short-lived stream token for the run's event streams (for EventSource in a browser)",
    description:
      "The token stands for the calling key on this run's streams only (`?stream_token=`), until `expires_at` " +
      '(STREAM_TOKEN_TTL_SECONDS); a stream open at expiry goes on. Streams opened with it count against the ' +
      "key's SSE_MAX_STREAMS_PER_KEY, and revoking the key ends its tokens.",
  })
  @ApiResponse({ status: 201, type: StreamTokenDto })
  @ApiResponse({ status: 404, type: ErrorResponseDto, description: 'Unknown run' })
  async mintStreamToken(
    @Param('run_id', uuid) runId: string,
    @Req() req: AuthenticatedRequest,
  ): Promise<StreamTokenDto> {
    await this.runs.assertExists(runId);
    const minted = this.streamTokens.mint(runId, req.principal!);
    return {
      token: minted.token,
      run_id: runId,
      expires_at: minted.expires_at,
      events_url: `/v1/runs/${runId}/events?stream_token=${encodeURIComponent(minted.token)}`,
    };
  }

  @Get(':run_id/events')
  @ApiOperation({
    summary: 'SSE of the run results: replay from a position, then live; ends after the terminal result',
    description:
      'Each frame: `id:` = sequence, `event:` = result type, `data:` = the result JSON (RunResultDto). Frames are ' +
      'named by result type, so `EventSource.onmessage` never fires: listen with `addEventListener(type)` ' +
      '(message.delta, message.completed, tool.call.started, tool.call.completed, run.completed, run.failed, …). ' +
      'Comments (`: keep-alive`) keep idle connections open. Resume with Last-Event-ID or ?after=; once the run ' +
      'has ended and nothing is left after that position, the answer is 204. Authenticate with ' +
      '`Authorization: Bearer <key>` or `?stream_token=`.',
  })
  @EventStreamRoute(RunEventFrameDto, 'text/event-stream of the run results, one frame per result (fields shown)')
  @ApiResponse({ status: 404, type: ErrorResponseDto, description: 'Unknown run' })
  @ApiResponse({ status: 429, type: ErrorResponseDto, description: 'Too many open streams for this API key' })
  async events(
    @Param('run_id', uuid) runId: string,
    @Query() q: RunEventsQueryDto,
    @Headers('last-event-id') lastEventId: string | undefined,
    @Req() req: AuthenticatedRequest,
    @Res() reply: FastifyReply,
  ): Promise<void> {
    await this.runs.assertExists(runId);
    const fromHeader = lastEventId !== undefined && /^\d+$/.test(lastEventId.trim()) ? Number(lastEventId) : undefined;
    if (lastEventId !== undefined && fromHeader === undefined) {
      throw new DomainError('invalid_argument', 'Last-Event-ID: must be a result sequence number', {
        field: 'Last-Event-ID',
      });
    }
    const after = q.after ?? fromHeader ?? 0;
    if (after > 0 && (await this.runs.streamIsOver(runId, after))) {
      // EventSource reconnects after every end of stream; 204 is the one answer that stops it.
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
    res.flushHeaders();
    this.open.add(res);
    const end = await this.runs
      .stream(runId, after, res, {
        maxBacklogBytes: this.config.sse.maxBacklogBytes,
        keepAliveMs: this.config.sse.keepAliveMs,
      })
      .finally(() => {
        release();
        this.open.delete(res);
      });
    if (end === 'cut') {
      this.logger.warn({ run_id: runId, msg: 'SSE reader disconnected: unsent backlog over SSE_MAX_BACKLOG_BYTES' });
    } else if (end === 'failed') {
      this.logger.error({ run_id: runId, msg: 'SSE replay failed' });
      res.destroy();
    }
  }

  /** Shutdown: end every open stream (readers resume with Last-Event-ID), or the server would wait for them forever. */
  beforeApplicationShutdown(): void {
    for (const res of this.open) {
      res.destroy();
    }
    this.open.clear();
  }
}
