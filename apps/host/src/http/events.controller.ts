import { Body, Controller, Headers, HttpCode, Post, Res } from '@nestjs/common';
import { ApiBearerAuth, ApiHeader, ApiOperation, ApiResponse, ApiTags } from '@nestjs/swagger';
import type { FastifyReply } from 'fastify';
import { Roles } from '@libs/auth';
import { DomainError } from '@libs/protocol';
import { AdmissionService } from '@libs/runs';
import { AdmissionDto, SubmitEventDto } from './dto/event.dto';
import { ErrorResponseDto } from './dto/error.dto';

@ApiTags('events')
@ApiBearerAuth()
@Controller('v1/events')
export class EventsController {
  constructor(private readonly admission: AdmissionService) {}

  @Post()
  @Roles('platform', 'admin')
  @HttpCode(202)
  @ApiOperation({
    summary: 'Ingest an event for an agent: starts a run, or — its conversation busy — steers, queues or rejects it',
    description:
      'One conversation (agent + conversation_id + thread_id) has at most one running run. A follow-up is handled by the concurrency policy (event `concurrency`, else the agent policy, else `steer` when the runner declares steering and `queue` otherwise).',
  })
  @ApiHeader({ name: 'Idempotency-Key', required: false, description: 'Replays return the original answer' })
  @ApiResponse({
    status: 202,
    type: AdmissionDto,
    description: 'Accepted: recorded, and its run started, or the event steered into the active run, or queued',
  })
  @ApiResponse({ status: 200, type: AdmissionDto, description: 'Duplicate of an event already accepted' })
  @ApiResponse({ status: 400, type: ErrorResponseDto })
  @ApiResponse({ status: 404, type: ErrorResponseDto, description: 'Unknown agent' })
  @ApiResponse({
    status: 409,
    type: ErrorResponseDto,
    description:
      'event_id or key reused with another body; or policy reject while the conversation is busy (details.disposition = rejected, details.run_id)',
  })
  @ApiResponse({ status: 503, type: ErrorResponseDto, description: 'Runner not connected (recorded; retryable)' })
  async submit(
    @Body() body: SubmitEventDto,
    @Headers('idempotency-key') key: string | undefined,
    @Res({ passthrough: true }) res: FastifyReply,
  ): Promise<AdmissionDto> {
    if (key !== undefined && (key.length === 0 || key.length > 255)) {
      throw new DomainError('invalid_argument', 'Idempotency-Key: must be 1-255 characters', {
        field: 'Idempotency-Key',
      });
    }
    const a = await this.admission.submit(body, key ?? null);
    if (a.replayed) {
      void res.status(200);
    }
    if (a.replayed) {
      void res.header('idempotent-replayed', 'true');
    }
    return {
      event_id: a.event_id,
      disposition: a.disposition,
      run_id: a.run_id,
      ...(a.position !== undefined ? { position: a.position } : {}),
      ...(a.interrupted_run_id ? { interrupted_run_id: a.interrupted_run_id } : {}),
    };
  }
}
