import { Body, Controller, Get, Headers, HttpCode, Param, Post, Query, Req, Res } from '@nestjs/common';
import { ApiBearerAuth, ApiOperation, ApiResponse, ApiTags } from '@nestjs/swagger';
import type { FastifyReply } from 'fastify';
import { Roles, StreamTokensService, type AuthenticatedRequest } from '@libs/auth';
import type { RunStatus } from '@libs/protocol';
import { RunsQueryService } from '@libs/runs';
import { runIdPipe } from './dto/rules';
import { ErrorResponseDto } from './dto/error.dto';
import { resumeAfter, SseStreams } from './sse-streams';
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

@ApiTags('runs')
@ApiBearerAuth()
@Roles('platform', 'admin')
@Controller('v1/runs')
export class RunsController {
  constructor(
    private readonly runs: RunsQueryService,
    private readonly streamTokens: StreamTokensService,
    private readonly streams: SseStreams,
  ) {}

  @Get()
  @ApiOperation({ summary: "List runs, newest first, cursor-paged (the key's workspaces only)" })
  @ApiResponse({ status: 200, type: RunPageDto })
  async list(@Query() q: ListRunsQueryDto, @Req() req: AuthenticatedRequest): Promise<RunPageDto> {
    const scope = req.principal!.workspaces;
    return this.runs.list(
      {
        conversation_id: q.conversation_id,
        agent_id: q.agent_id,
        status: q.status as RunStatus[] | undefined,
        // docs/tenancy.md#isolation: a workspace key lists its workspaces' runs only.
        ...(scope === null ? {} : { workspaces: scope }),
      },
      q.cursor ?? null,
      q.limit ?? 50,
    );
  }

  @Get(':run_id')
  @ApiOperation({ summary: 'A run: status, runner, timings, usage' })
  @ApiResponse({ status: 200, type: RunDto })
  @ApiResponse({ status: 404, type: ErrorResponseDto })
  async get(@Param('run_id', runIdPipe) runId: string): Promise<RunDto> {
    return this.runs.get(runId);
  }

  @Post(':run_id/cancel')
  @HttpCode(200)
  @ApiOperation({ summary: 'Cancel a run: the runner is told, given a grace period, then the run is cancelled' })
  @ApiResponse({ status: 200, type: RunDto })
  @ApiResponse({ status: 404, type: ErrorResponseDto })
  @ApiResponse({ status: 409, type: ErrorResponseDto, description: 'The run already ended' })
  async cancel(@Param('run_id', runIdPipe) runId: string, @Body() body: CancelRunDto): Promise<RunDto> {
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
    @Param('run_id', runIdPipe) runId: string,
    @Req() req: AuthenticatedRequest,
  ): Promise<StreamTokenDto> {
    await this.runs.assertExists(runId);
    const minted = await this.streamTokens.mint(runId, req.principal!);
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
    @Param('run_id', runIdPipe) runId: string,
    @Query() q: RunEventsQueryDto,
    @Headers('last-event-id') lastEventId: string | undefined,
    @Req() req: AuthenticatedRequest,
    @Res() reply: FastifyReply,
  ): Promise<void> {
    const status = await this.runs.existingStatus(runId);
    const after = resumeAfter('results', q.after, lastEventId);
    await this.streams.serve('results', runId, after, req, reply, '', status);
  }
}
