import type { AuthenticatedRequest } from '@libs/auth';
import { WriteTenancy } from '../tenancy';
import { Controller, Get, HttpCode, Param, Post, Query, Req } from '@nestjs/common';
import { ApiBearerAuth, ApiOperation, ApiResponse, ApiTags } from '@nestjs/swagger';
import { DeliveryAdminService } from '@libs/delivery';
import type { OutboxRow } from '@libs/persistence';
import { RunsQueryService } from '@libs/runs';
import { runIdPipe } from '../dto/rules';
import { PageQueryDto } from '../dto/admin.dto';
import { DeliveryRecordDto, DeliveryRecordPageDto, DeliveryRetryDto } from '../dto/delivery.dto';
import { ErrorResponseDto } from '../dto/error.dto';

function recordOf(r: OutboxRow): DeliveryRecordDto {
  const { id: _id, webhook_secret_env: _secret, ...rest } = r;
  return {
    ...rest,
    created_at: new Date(r.created_at).toISOString(),
    next_attempt_at: r.next_attempt_at === null ? null : new Date(r.next_attempt_at).toISOString(),
    delivered_at: r.delivered_at === null ? null : new Date(r.delivered_at).toISOString(),
  };
}

@ApiTags('admin')
@ApiBearerAuth()
@Controller('v1/admin')
export class AdminDeliveriesController {
  constructor(
    private readonly deliveries: DeliveryAdminService,
    private readonly runs: RunsQueryService,
    private readonly tenancy: WriteTenancy,
  ) {}

  @Get('deliveries/failed')
  @ApiOperation({
    summary:
      'Delivery ops whose webhook push failed (retries exhausted, or after such an op of their run), newest first',
  })
  @ApiResponse({ status: 200, type: DeliveryRecordPageDto })
  async failed(@Query() q: PageQueryDto, @Req() req: AuthenticatedRequest): Promise<DeliveryRecordPageDto> {
    const page = await this.deliveries.failed(q.cursor, q.limit ?? 50);
    // docs/tenancy.md#isolation: a workspace key sees its runs' ops (a page may come out shorter).
    return { items: (await this.tenancy.ofVisibleRuns(req, page.items)).map(recordOf), next_cursor: page.next_cursor };
  }

  @Get('runs/:run_id/deliveries')
  @ApiOperation({ summary: "A run's delivery ops in order, with their webhook state, attempts and last error" })
  @ApiResponse({ status: 200, type: [DeliveryRecordDto] })
  @ApiResponse({ status: 404, type: ErrorResponseDto })
  async ofRun(@Param('run_id', runIdPipe) runId: string): Promise<DeliveryRecordDto[]> {
    await this.runs.assertExists(runId);
    return (await this.deliveries.ofRun(runId)).map(recordOf);
  }

  @Post('runs/:run_id/deliveries/retry')
  @HttpCode(200)
  @ApiOperation({
    summary: "Send a run's failed webhook ops again, in order, each with a fresh attempt budget (409 when none failed)",
  })
  @ApiResponse({ status: 200, type: DeliveryRetryDto })
  @ApiResponse({ status: 404, type: ErrorResponseDto })
  @ApiResponse({ status: 409, type: ErrorResponseDto })
  async retry(@Param('run_id', runIdPipe) runId: string): Promise<DeliveryRetryDto> {
    await this.runs.assertExists(runId);
    return { run_id: runId, retried: await this.deliveries.retry(runId) };
  }
}
