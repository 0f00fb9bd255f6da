import { Controller, Get, Param, Query, Req } from '@nestjs/common';
import type { AuthenticatedRequest } from '@libs/auth';
import { WriteTenancy } from '../tenancy';
import { ApiBearerAuth, ApiOperation, ApiResponse, ApiTags } from '@nestjs/swagger';
import { SteeringAdminService } from '@libs/runs';
import { ErrorResponseDto } from '../dto/error.dto';
import { SteeringQueryDto, SteeringViewDto, TimelineDto, TimelineQueryDto } from '../dto/steering.dto';

@ApiTags('admin')
@ApiBearerAuth()
@Controller('v1/admin')
export class SteeringController {
  constructor(
    private readonly steering: SteeringAdminService,
    private readonly tenancy: WriteTenancy,
  ) {}

  @Get('steering')
  @ApiOperation({
    summary: 'Steering and waiting follow-ups: active runs with their queues, and every item with its state',
  })
  @ApiResponse({ status: 200, type: SteeringViewDto })
  @ApiResponse({ status: 400, type: ErrorResponseDto })
  async list(@Query() q: SteeringQueryDto, @Req() req: AuthenticatedRequest): Promise<SteeringViewDto> {
    return this.steering.list(
      {
        conversation_id: q.conversation_id,
        agent_id: q.agent_id,
        workspace_id: this.tenancy.read(req, q.workspace_id),
        run_id: q.run_id,
        states: q.state ? [q.state] : undefined,
      },
      q.cursor ?? null,
      q.limit ?? 50,
    );
  }

  @Get('conversations/:conversation_id/timeline')
  @ApiOperation({ summary: "A conversation's timeline: events with their dispositions, runs, steering transitions" })
  @ApiResponse({ status: 200, type: TimelineDto })
  async timeline(
    @Param('conversation_id') conversationId: string,
    @Query() q: TimelineQueryDto,
    @Req() req: AuthenticatedRequest,
  ): Promise<TimelineDto> {
    return this.steering.timeline(conversationId, q.agent_id, this.tenancy.scope(req));
  }
}
