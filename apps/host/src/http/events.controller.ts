import { Body, Controller, Headers, HttpCode, Post, Req, Res } from '@nestjs/common';
import { ApiBearerAuth, ApiBody, ApiHeader, ApiOperation, ApiProduces, ApiResponse, ApiTags } from '@nestjs/swagger';
import type { FastifyReply } from 'fastify';
import { Roles, type AuthenticatedRequest } from '@libs/auth';
import { DomainError } from '@libs/protocol';
import { AdmissionService, InteractionsService, WorkspaceAdmission, type EventSubmission } from '@libs/runs';
import { AdmissionDto } from './dto/event.dto';
import { BodyPipe } from './compiled-body';
import { bodyRef, submitEventBody } from './dto/event.schema';
import { telemetry } from '@libs/telemetry';
import { ErrorResponseDto } from './dto/error.dto';
import { SseStreams } from './sse-streams';
import { WriteTenancy } from './tenancy';

@ApiTags('events')
@ApiBearerAuth()
@Controller('v1/events')
export class EventsController {
  constructor(
    private readonly admission: AdmissionService,
    private readonly streams: SseStreams,
    private readonly interactions: InteractionsService,
    private readonly tenancy: WorkspaceAdmission,
    private readonly scope: WriteTenancy,
  ) {}

  @Post()
  @Roles('platform', 'admin')
  @HttpCode(202)
  @ApiOperation({
    summary: 'Ingest an event for an agent: starts a run, or — its conversation busy — steers, queues or rejects it',
    description:
      'One conversation (agent + conversation_id + thread_id) has at most one running run. A follow-up is handled by the concurrency policy (event `concurrency`, else the agent policy, else `steer` when the runner declares steering and `queue` otherwise). ' +
      'With `Accept: text/event-stream` the answer is 200 and an SSE stream: first an `admission` event ' +
      "(the JSON below), then the run's delivery ops as GET /v1/runs/{run_id}/deliveries streams them.",
  })
  @ApiBody(bodyRef('SubmitEventDto'))
  @ApiProduces('application/json', 'text/event-stream')
  @ApiHeader({ name: 'Idempotency-Key', required: false, description: 'Replays return the original answer' })
  @ApiResponse({
    status: 202,
    type: AdmissionDto,
    description: 'Accepted: recorded, and its run started, or the event steered into the active run, or queued',
  })
  @ApiResponse({ status: 200, type: AdmissionDto, description: 'Duplicate of an event already accepted' })
  @ApiResponse({ status: 400, type: ErrorResponseDto })
  @ApiResponse({
    status: 403,
    type: ErrorResponseDto,
    description: "conversation.workspace_id names a workspace other than the agent's (details.field)",
  })
  @ApiResponse({ status: 404, type: ErrorResponseDto, description: "Unknown agent, or another workspace's" })
  @ApiResponse({
    status: 429,
    type: ErrorResponseDto,
    description: 'A workspace quota is reached (details.quota, details.workspace_id; Retry-After)',
  })
  @ApiResponse({
    status: 409,
    type: ErrorResponseDto,
    description:
      'event_id or key reused with another body; or policy reject while the conversation is busy (details.disposition = rejected, details.run_id)',
  })
  @ApiResponse({
    status: 503,
    type: ErrorResponseDto,
    description:
      'Runner not connected (recorded; retryable); or this process is shutting down (details.reason = host.draining, Retry-After; nothing recorded: send it again)',
  })
  async submit(
    // docs/architecture.md#validation: the body's JSON schema, compiled once, names every field at fault.
    @Body(new BodyPipe(submitEventBody)) body: EventSubmission,
    @Headers('idempotency-key') key: string | undefined,
    @Headers('accept') accept: string | undefined,
    @Req() req: AuthenticatedRequest,
    // The handler answers itself: JSON, or (Accept: text/event-stream) a stream it writes to the end.
    @Res() res: FastifyReply,
  ): Promise<void> {
    if (key !== undefined && (key.length === 0 || key.length > 255)) {
      throw new DomainError('invalid_argument', 'Idempotency-Key: must be 1-255 characters', {
        field: 'Idempotency-Key',
      });
    }
    // The admission begins here: its catalogue reads share one version read (docs/scale-out.md#admin-writes).
    const since = performance.now();
    // Its reads of the conversation start now, beside the catalogue version read (AdmissionService.readAhead).
    const ahead = this.admission.readAhead(body);
    // docs/tenancy.md#runs: the workspace comes from the key and the agent, never from the body.
    const derived = await this.tenancy.derive(body, req.principal!.workspaces, since);
    body = derived.submission;
    if (body.event.event_type === 'interaction.submitted') {
      // docs/interactions.md#submitting: the token decides; the host admits the checked submission as the event.
      const s = await this.interactions.submit(null, body.input.interaction ?? {}, body.agent_id, (runId) =>
        this.scope.seesRun(req, runId),
      );
      await res.status(202).send({ event_id: s.event_id, disposition: s.disposition, run_id: s.run_id });
      return;
    }
    // A caller's W3C trace context (traceparent) is continued: the event's spans join its trace.
    const a = await telemetry.tracing.within(telemetry.tracing.extract(req.headers), () =>
      this.admission.submit(body, key ?? null, since, derived.agent, ahead),
    );
    const answer: AdmissionDto = {
      event_id: a.event_id,
      disposition: a.disposition,
      run_id: a.run_id,
      ...(a.position !== undefined ? { position: a.position } : {}),
      ...(a.interrupted_run_id ? { interrupted_run_id: a.interrupted_run_id } : {}),
    };
    if (a.run_id !== null && /\btext\/event-stream\b/i.test(accept ?? '')) {
      const preamble = `event: admission\ndata: ${JSON.stringify({ ...answer, replayed: a.replayed })}\n\n`;
      await this.streams.serve('deliveries', a.run_id, 0, req, res, preamble);
      return;
    }
    if (a.replayed) {
      void res.header('idempotent-replayed', 'true');
    }
    await res.status(a.replayed ? 200 : 202).send(answer);
  }
}
