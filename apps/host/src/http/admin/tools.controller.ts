import { Body, Controller, Delete, Get, HttpCode, Param, Post, Put, Req } from '@nestjs/common';
import { ApiBearerAuth, ApiOperation, ApiResponse, ApiTags } from '@nestjs/swagger';
import { InvalidatesCatalog } from '@libs/authz';
import { ToolSourcesService } from '@libs/resources';
import { GlobalAdminOnly, type AuthenticatedRequest } from '@libs/auth';
import { ErrorResponseDto } from '../dto/error.dto';
import { WriteTenancy } from '../tenancy';
import { CreateToolSourceDto, SetBuiltinToolDto, ToolDto, ToolSourceBodyDto, ToolSourceDto } from '../dto/tools.dto';

@ApiTags('admin')
@ApiBearerAuth()
@InvalidatesCatalog()
@Controller('v1/admin/tools')
export class ToolsController {
  constructor(
    private readonly sources: ToolSourcesService,
    private readonly tenancy: WriteTenancy,
  ) {}

  @Get()
  @ApiOperation({ summary: 'Every tool with its source: built-ins (on or off) and the tools the sources list' })
  @ApiResponse({ status: 200, type: [ToolDto] })
  async tools(@Req() req: AuthenticatedRequest): Promise<ToolDto[]> {
    return this.sources.tools(this.tenancy.scope(req));
  }

  @Put('builtins/:name')
  @GlobalAdminOnly()
  @ApiOperation({ summary: 'Switch a built-in tool on or off (current_time is on, http_fetch off by default)' })
  @ApiResponse({ status: 200, type: ToolDto })
  @ApiResponse({ status: 404, type: ErrorResponseDto })
  async setBuiltin(@Param('name') name: string, @Body() body: SetBuiltinToolDto): Promise<ToolDto> {
    return this.sources.setBuiltin(name, body.enabled);
  }

  @Post('sources')
  @ApiOperation({
    summary: 'Register a tool source (MCP over stdio or streamable HTTP, or HTTP tools) and list its tools',
    description: 'A server that cannot be reached is still registered, with status "error" and last_error.',
  })
  @ApiResponse({ status: 201, type: ToolSourceDto })
  @ApiResponse({ status: 400, type: ErrorResponseDto })
  @ApiResponse({ status: 409, type: ErrorResponseDto })
  async create(@Body() body: CreateToolSourceDto, @Req() req: AuthenticatedRequest): Promise<ToolSourceDto> {
    const { source_id, workspace_id, shared, ...input } = body;
    return this.sources.create(source_id, input, {
      workspace_id: this.tenancy.target(req, workspace_id),
      shared: this.tenancy.shared(req, shared),
    });
  }

  @Get('sources')
  @ApiOperation({ summary: 'List tool sources with their status and tools' })
  @ApiResponse({ status: 200, type: [ToolSourceDto] })
  async list(@Req() req: AuthenticatedRequest): Promise<ToolSourceDto[]> {
    return this.sources.list(this.tenancy.scope(req));
  }

  @Get('sources/:source_id')
  @ApiOperation({ summary: 'A tool source: status, last error, tools' })
  @ApiResponse({ status: 200, type: ToolSourceDto })
  @ApiResponse({ status: 404, type: ErrorResponseDto })
  async get(@Param('source_id') sourceId: string): Promise<ToolSourceDto> {
    return this.sources.get(sourceId);
  }

  @Put('sources/:source_id')
  @ApiOperation({ summary: 'Replace a source (reconnects and lists its tools again)' })
  @ApiResponse({ status: 200, type: ToolSourceDto })
  @ApiResponse({ status: 404, type: ErrorResponseDto })
  async replace(@Param('source_id') sourceId: string, @Body() body: ToolSourceBodyDto): Promise<ToolSourceDto> {
    return this.sources.replace(sourceId, body);
  }

  @Delete('sources/:source_id')
  @HttpCode(204)
  @ApiOperation({ summary: 'Remove a source and its tools (runs granted them get not_found when calling them)' })
  @ApiResponse({ status: 204 })
  @ApiResponse({ status: 404, type: ErrorResponseDto })
  async remove(@Param('source_id') sourceId: string): Promise<void> {
    await this.sources.remove(sourceId);
  }

  @Post('sources/:source_id/refresh')
  @HttpCode(200)
  @ApiOperation({ summary: "List the source's tools again (reconnecting an MCP server whose connection is gone)" })
  @ApiResponse({ status: 200, type: ToolSourceDto })
  @ApiResponse({ status: 404, type: ErrorResponseDto })
  @ApiResponse({ status: 409, type: ErrorResponseDto, description: 'The source is disabled' })
  async refresh(@Param('source_id') sourceId: string): Promise<ToolSourceDto> {
    return this.sources.refresh(sourceId);
  }
}
