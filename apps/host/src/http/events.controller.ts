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
  @ApiOperation({ summary: 'Ingest an event for an agent; starts a run on its runner' })
  @ApiHeader({ name: 'Idempotency-Key', required: false, description: 'Replays return the original answer' })
  @ApiResponse({ status: 202, type: AdmissionDto, description: 'Accepted: the event is recorded and its run started' })
  @ApiResponse({ status: 200, type: AdmissionDto, description: 'Duplicate of an event already accepted' })
  @ApiResponse({ status: 400, type: ErrorResponseDto })
  @ApiResponse({ status: 404, type: ErrorResponseDto, description: 'Unknown agent' })
  @ApiResponse({ status: 409, type: ErrorResponseDto, description: 'event_id or key reused with another body' })
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
    return { event_id: a.event_id, disposition: a.disposition, run_id: a.run_id };
  }
}
