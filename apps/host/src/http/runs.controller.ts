import { Body, Controller, Get, Headers, HttpCode, Param, ParseUUIDPipe, Post, Query, Req, Res } from '@nestjs/common';
import { ApiBearerAuth, ApiOperation, ApiProduces, ApiResponse, ApiTags } from '@nestjs/swagger';
import type { Request, Response } from 'express';
import { Roles } from '@libs/auth';
import { DomainError, type RunStatus } from '@libs/protocol';
import { RunsQueryService } from '@libs/runs';
import { ErrorResponseDto } from './dto/error.dto';
import { CancelRunDto, ListRunsQueryDto, RunDto, RunEventsQueryDto, RunPageDto } from './dto/run.dto';

const uuid = new ParseUUIDPipe({
  exceptionFactory: () => new DomainError('invalid_argument', 'run_id: must be a UUID', { field: 'run_id' }),
});

@ApiTags('runs')
@ApiBearerAuth()
@Roles('platform', 'admin')
@Controller('v1/runs')
export class RunsController {
  constructor(private readonly runs: RunsQueryService) {}

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
  async events(
    @Param('run_id', uuid) runId: string,
    @Query() q: RunEventsQueryDto,
    @Headers('last-event-id') lastEventId: string | undefined,
    @Req() req: Request,
    @Res() res: Response,
  ): Promise<void> {
    await this.runs.get(runId);
    const fromHeader = lastEventId !== undefined && /^\d+$/.test(lastEventId.trim()) ? Number(lastEventId) : undefined;
    if (lastEventId !== undefined && fromHeader === undefined) {
      throw new DomainError('invalid_argument', 'Last-Event-ID: must be a result sequence number', {
        field: 'Last-Event-ID',
      });
    }
    const after = q.after ?? fromHeader ?? 0;
    res.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache, no-transform',
      connection: 'keep-alive',
      'x-accel-buffering': 'no',
    });
    res.flushHeaders();
    const keepAlive = setInterval(() => res.write(': keep-alive\n\n'), 15_000);
    const sub = this.runs.stream(runId, after).subscribe({
      next: (r) => res.write(`id: ${r.sequence}\nevent: ${r.type}\ndata: ${JSON.stringify(r)}\n\n`),
      error: () => {
        clearInterval(keepAlive);
        res.end();
      },
      complete: () => {
        clearInterval(keepAlive);
        res.end();
      },
    });
    req.on('close', () => {
      clearInterval(keepAlive);
      sub.unsubscribe();
    });
  }
}
