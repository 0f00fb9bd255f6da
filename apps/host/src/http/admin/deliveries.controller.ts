import { Controller, Get, Param, ParseUUIDPipe, Query } from '@nestjs/common';
import { ApiBearerAuth, ApiOperation, ApiResponse, ApiTags } from '@nestjs/swagger';
import { OutboxStore } from '@libs/delivery';
import type { OutboxRow } from '@libs/persistence';
import { DomainError } from '@libs/protocol';
import { RunsQueryService } from '@libs/runs';
import { PageQueryDto } from '../dto/admin.dto';
import { INT32_MAX } from '../dto/rules';
import { DeliveryRecordDto, DeliveryRecordPageDto } from '../dto/delivery.dto';
import { ErrorResponseDto } from '../dto/error.dto';

const uuid = new ParseUUIDPipe({
  exceptionFactory: () => new DomainError('invalid_argument', 'run_id: must be a UUID', { field: 'run_id' }),
});

/** The most ops of one run the admin listing returns. */
const RUN_OPS_LIMIT = 10_000;

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
    private readonly outbox: OutboxStore,
    private readonly runs: RunsQueryService,
  ) {}

  @Get('deliveries/failed')
  @ApiOperation({
    summary:
      'Delivery ops whose webhook push failed (retries exhausted, or after such an op of their run), newest first',
  })
  @ApiResponse({ status: 200, type: DeliveryRecordPageDto })
  async failed(@Query() q: PageQueryDto): Promise<DeliveryRecordPageDto> {
    // Ids are INTEGER (SERIAL on PostgreSQL): the first page starts above the largest one.
    const before = q.cursor === undefined ? INT32_MAX : Number(q.cursor);
    if (!Number.isInteger(before) || before <= 0 || before > INT32_MAX) {
      throw new DomainError('invalid_argument', 'cursor: must be a cursor returned by a previous page', {
        field: 'cursor',
      });
    }
    const limit = q.limit ?? 50;
    const rows = await this.outbox.failedPage(before, limit + 1);
    const page = rows.slice(0, limit);
    return {
      items: page.map(recordOf),
      next_cursor: rows.length > limit ? String(page[page.length - 1].id) : null,
    };
  }

  @Get('runs/:run_id/deliveries')
  @ApiOperation({ summary: "A run's delivery ops in order, with their webhook state, attempts and last error" })
  @ApiResponse({ status: 200, type: [DeliveryRecordDto] })
  @ApiResponse({ status: 404, type: ErrorResponseDto })
  async ofRun(@Param('run_id', uuid) runId: string): Promise<DeliveryRecordDto[]> {
    await this.runs.assertExists(runId);
    return (await this.outbox.ofRun(runId, RUN_OPS_LIMIT)).map(recordOf);
  }
}
