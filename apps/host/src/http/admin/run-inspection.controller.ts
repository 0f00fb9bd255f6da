import { Controller, Get, Param, Query } from '@nestjs/common';
import { ApiBearerAuth, ApiOperation, ApiResponse, ApiTags } from '@nestjs/swagger';
import { AuditService } from '@libs/authz';
import { DomainError } from '@libs/protocol';
import { RunsQueryService } from '@libs/runs';
import { INT32_MAX, runIdPipe } from '../dto/rules';
import { AuditPageDto, AuthorizationDto } from '../dto/inspection.dto';
import { ErrorResponseDto } from '../dto/error.dto';
import { PageQueryDto } from '../dto/admin.dto';

@ApiTags('admin')
@ApiBearerAuth()
@Controller('v1/admin/runs')
export class RunInspectionController {
  constructor(
    private readonly runs: RunsQueryService,
    private readonly audit: AuditService,
  ) {}

  @Get(':run_id/authorization')
  @ApiOperation({ summary: "The run's frozen authorization snapshot and its content hash" })
  @ApiResponse({ status: 200, type: AuthorizationDto })
  @ApiResponse({ status: 404, type: ErrorResponseDto })
  async authorization(@Param('run_id', runIdPipe) runId: string): Promise<AuthorizationDto> {
    return this.runs.authorization(runId);
  }

  @Get(':run_id/audit')
  @ApiOperation({ summary: "The run's audit log: every host API call, allowed or denied, oldest first" })
  @ApiResponse({ status: 200, type: AuditPageDto })
  @ApiResponse({ status: 404, type: ErrorResponseDto })
  async auditLog(@Param('run_id', runIdPipe) runId: string, @Query() q: PageQueryDto): Promise<AuditPageDto> {
    await this.runs.get(runId);
    const after = q.cursor === undefined ? 0 : Number(q.cursor);
    if (!Number.isInteger(after) || after < 0 || after > INT32_MAX) {
      throw new DomainError('invalid_argument', 'cursor: must be a cursor returned by a previous page', {
        field: 'cursor',
      });
    }
    return this.audit.list(runId, after, q.limit ?? 100);
  }
}
