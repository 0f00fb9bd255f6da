import { Body, Controller, Delete, Get, HttpCode, Param, Post, Put, Req } from '@nestjs/common';
import { ApiBearerAuth, ApiOperation, ApiResponse, ApiTags } from '@nestjs/swagger';
import { GlobalAdminOnly, type AuthenticatedRequest } from '@libs/auth';
import { WorkspacesService } from '@libs/authz';
import { WorkspacesRepository } from '@libs/persistence';
import { WorkspaceQuotaGate } from '@libs/runs';
import { ErrorResponseDto } from '../dto/error.dto';
import { CreateWorkspaceDto, UpdateWorkspaceDto, WorkspaceDto, WorkspaceUsageDto } from '../dto/workspace.dto';

const DAY_MS = 86_400_000;

/** Workspaces (docs/tenancy.md): global admins manage them; a workspace's admin reads and tunes its own. */
@ApiTags('admin')
@ApiBearerAuth()
@Controller('v1/admin/workspaces')
export class WorkspacesController {
  constructor(
    private readonly workspaces: WorkspacesService,
    private readonly repo: WorkspacesRepository,
    private readonly quotas: WorkspaceQuotaGate,
  ) {}

  @Post()
  @GlobalAdminOnly()
  @ApiOperation({ summary: 'Create a workspace (global admin keys only)' })
  @ApiResponse({ status: 201, type: WorkspaceDto })
  @ApiResponse({ status: 400, type: ErrorResponseDto })
  @ApiResponse({ status: 409, type: ErrorResponseDto })
  async create(@Body() body: CreateWorkspaceDto): Promise<WorkspaceDto> {
    const { workspace_id, ...input } = body;
    return this.workspaces.create(workspace_id, input);
  }

  @Get()
  @ApiOperation({ summary: "List workspaces: all for a global key, the key's own otherwise" })
  @ApiResponse({ status: 200, type: [WorkspaceDto] })
  list(@Req() req: AuthenticatedRequest): WorkspaceDto[] {
    return this.workspaces.list(req.principal!.workspaces);
  }

  @Get(':workspace_id')
  @ApiOperation({ summary: 'A workspace and its quotas' })
  @ApiResponse({ status: 200, type: WorkspaceDto })
  @ApiResponse({ status: 404, type: ErrorResponseDto })
  get(@Param('workspace_id') id: string, @Req() req: AuthenticatedRequest): WorkspaceDto {
    return this.workspaces.get(id, req.principal!.workspaces);
  }

  @Put(':workspace_id')
  @GlobalAdminOnly()
  @ApiOperation({ summary: "Change a workspace's name or quotas (global admin keys only); quotas apply at once" })
  @ApiResponse({ status: 200, type: WorkspaceDto })
  @ApiResponse({
    status: 400,
    type: ErrorResponseDto,
    description: 'A quota that is not a positive integer (details.field)',
  })
  @ApiResponse({ status: 404, type: ErrorResponseDto })
  async update(@Param('workspace_id') id: string, @Body() body: UpdateWorkspaceDto): Promise<WorkspaceDto> {
    return this.workspaces.update(id, body, null);
  }

  @Delete(':workspace_id')
  @GlobalAdminOnly()
  @HttpCode(204)
  @ApiOperation({ summary: 'Delete an empty workspace (global admin keys only; never `default`)' })
  @ApiResponse({ status: 204 })
  @ApiResponse({ status: 404, type: ErrorResponseDto })
  @ApiResponse({ status: 409, type: ErrorResponseDto, description: 'It still owns agents or resources (details.owns)' })
  async remove(@Param('workspace_id') id: string): Promise<void> {
    await this.workspaces.delete(id);
  }

  @Get(':workspace_id/usage')
  @ApiOperation({
    summary: 'What the workspace uses against each quota now (docs/tenancy.md#quotas)',
    description: 'Active runs are those of this host process; the rest is read from the database.',
  })
  @ApiResponse({ status: 200, type: WorkspaceUsageDto })
  @ApiResponse({ status: 404, type: ErrorResponseDto })
  async usage(@Param('workspace_id') id: string, @Req() req: AuthenticatedRequest): Promise<WorkspaceUsageDto> {
    const w = this.workspaces.get(id, req.principal!.workspaces);
    const now = Date.now();
    const u = await this.repo.usage(id, now - (now % DAY_MS));
    const q = w.quotas;
    return {
      workspace_id: id,
      active_runs: { used: u.active_runs, limit: q.max_active_runs ?? null },
      steering_queue: { used: u.queued_steering_items, limit: q.max_steering_queue ?? null },
      storage_bytes: { used: u.storage_bytes, limit: q.max_storage_bytes ?? null },
      model_tokens_today: { used: u.model_tokens_today, limit: q.max_model_tokens_per_day ?? null },
      // Admissions counted in the rate bucket: its burst less the tokens left.
      runs_per_second: {
        used:
          q.runs_per_second === undefined ? 0 : (q.runs_burst ?? q.runs_per_second) - (this.quotas.runsLeft(id) ?? 0),
        limit: q.runs_per_second ?? null,
      },
    };
  }
}
