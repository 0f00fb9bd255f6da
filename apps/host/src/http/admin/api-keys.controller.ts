import { Body, Controller, Delete, Get, HttpCode, Param, Post, Req } from '@nestjs/common';
import { ApiBearerAuth, ApiOperation, ApiResponse, ApiTags } from '@nestjs/swagger';
import { ApiKeysService, type AuthenticatedRequest } from '@libs/auth';
import { DomainError } from '@libs/protocol';
import { WorkspacesService } from '@libs/authz';
import { ErrorResponseDto } from '../dto/error.dto';
import { WriteTenancy } from '../tenancy';
import { ApiKeyDto, ApiKeyWithSecretDto, CreateApiKeyDto } from '../dto/admin.dto';

@ApiTags('admin')
@ApiBearerAuth()
@Controller('v1/admin/api-keys')
export class ApiKeysController {
  constructor(
    private readonly keys: ApiKeysService,
    private readonly tenancy: WriteTenancy,
    private readonly workspaces: WorkspacesService,
  ) {}

  @Post()
  @ApiOperation({
    summary: 'Create an API key (platform or admin) for one or more workspaces; the key is shown once',
    description:
      'A workspace-scoped admin creates keys within its own workspaces only (403 naming workspace_ids otherwise).',
  })
  @ApiResponse({ status: 201, type: ApiKeyWithSecretDto })
  @ApiResponse({ status: 400, type: ErrorResponseDto, description: 'An unknown workspace (details.field)' })
  @ApiResponse({ status: 403, type: ErrorResponseDto, description: "A workspace outside the caller's" })
  async create(@Body() body: CreateApiKeyDto, @Req() req: AuthenticatedRequest): Promise<ApiKeyWithSecretDto> {
    return this.keys.create(body.name, body.role, this.workspacesOf(body, req));
  }

  @Get()
  @ApiOperation({ summary: "List API keys (never the keys themselves): a scoped caller's within its workspaces" })
  @ApiResponse({ status: 200, type: [ApiKeyDto] })
  async list(@Req() req: AuthenticatedRequest): Promise<ApiKeyDto[]> {
    return this.keys.list(this.tenancy.scope(req));
  }

  /** The new key's workspaces (docs/tenancy.md#keys). */
  private workspacesOf(body: CreateApiKeyDto, req: AuthenticatedRequest): string[] | null {
    const scope = this.tenancy.scope(req);
    if (body.workspace_ids === undefined || body.workspace_ids === null) {
      if (body.role === 'admin') {
        return scope === null ? null : [...scope];
      }
      return [this.tenancy.target(req, undefined)];
    }
    body.workspace_ids.forEach((w, i) => {
      const field = `workspace_ids[${i}]`;
      if (scope !== null && !scope.includes(w)) {
        throw new DomainError('unauthorized', `${field}: ${w} is not a workspace of this API key`, { field });
      }
      if (!this.workspaces.exists(w)) {
        throw new DomainError('invalid_argument', `${field}: workspace ${w} does not exist`, { field });
      }
    });
    return body.workspace_ids;
  }

  @Delete(':id')
  @HttpCode(204)
  @ApiOperation({ summary: 'Revoke an API key' })
  @ApiResponse({ status: 204 })
  @ApiResponse({ status: 404, type: ErrorResponseDto })
  async revoke(@Param('id') id: string, @Req() req: AuthenticatedRequest): Promise<void> {
    await this.keys.revoke(id, req.principal!);
  }
}
