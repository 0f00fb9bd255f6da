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
import { ApiBearerAuth, ApiOperation, ApiProduces, ApiResponse, ApiTags } from '@nestjs/swagger';
import type { ServerResponse } from 'node:http';
import type { BeforeApplicationShutdown } from '@nestjs/common';
import type { FastifyReply } from 'fastify';
import { Roles, type AuthenticatedRequest } from '@libs/auth';
import { APP_CONFIG, type AppConfig } from '@libs/config';
import { DomainError, type RunStatus } from '@libs/protocol';
import { RunsQueryService } from '@libs/runs';
import { ErrorResponseDto } from './dto/error.dto';
import { StreamSlots } from './stream-slots';
import { CancelRunDto, ListRunsQueryDto, RunDto, RunEventsQueryDto, RunPageDto } from './dto/run.dto';

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

  @Get(':run_id/events')
  @ApiOperation({
    summary: 'SSE of the run results: replay from a position, then live; ends after the terminal result',
    description:
      'Each event: `id:` = sequence, `event:` = result type, `data:` = the result JSON. Resume with Last-Event-ID or ?after=.',
  })
  @ApiProduces('text/event-stream')
  @ApiResponse({ status: 200, description: 'text/event-stream of results' })
  @ApiResponse({ status: 404, type: ErrorResponseDto })
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
