import { Controller, Get, Headers, Param, Query, Req, Res } from '@nestjs/common';
import { ApiBearerAuth, ApiOperation, ApiProduces, ApiResponse, ApiTags } from '@nestjs/swagger';
import type { FastifyReply } from 'fastify';
import { AcceptsStreamToken, Roles, type AuthenticatedRequest } from '@libs/auth';
import { RunsQueryService } from '@libs/runs';
import { runIdPipe } from './dto/rules';
import { ErrorResponseDto } from './dto/error.dto';
import { RunEventsQueryDto } from './dto/run.dto';
import { resumeAfter, SseStreams } from './sse-streams';

@ApiTags('runs')
@ApiBearerAuth()
@Roles('platform', 'admin')
@Controller('v1/runs')
export class DeliveriesController {
  constructor(
    private readonly runs: RunsQueryService,
    private readonly streams: SseStreams,
  ) {}

  @Get(':run_id/deliveries')
  @AcceptsStreamToken()
  @ApiOperation({
    summary: "SSE of the run's delivery ops: replay from a position, then live; ends after the run's last op",
    description:
      'Each event: `id:` = op sequence, `event:` = op (`message.send`, `message.edit`, `message.final`, ' +
      '`attachment.send`, `notice.send`), `data:` = the op JSON. Resume with Last-Event-ID or ?after=.',
  })
  @ApiProduces('text/event-stream')
  @ApiResponse({ status: 200, description: 'text/event-stream of delivery ops' })
  @ApiResponse({
    status: 204,
    description:
      'The run has ended and the resume position is at its last op: nothing more will come (EventSource stops)',
  })
  @ApiResponse({ status: 404, type: ErrorResponseDto })
  @ApiResponse({ status: 429, type: ErrorResponseDto, description: 'Too many open streams for this API key' })
  async deliveries(
    @Param('run_id', runIdPipe) runId: string,
    @Query() q: RunEventsQueryDto,
    @Headers('last-event-id') lastEventId: string | undefined,
    @Req() req: AuthenticatedRequest,
    @Res() reply: FastifyReply,
  ): Promise<void> {
    const status = await this.runs.existingStatus(runId);
    const after = resumeAfter('deliveries', q.after, lastEventId);
    await this.streams.serve('deliveries', runId, after, req, reply, '', status);
  }
}
