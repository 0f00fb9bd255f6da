import { Body, Controller, Delete, Get, HttpCode, Param, Post, Put, Query, Req } from '@nestjs/common';
import type { AuthenticatedRequest } from '@libs/auth';
import { ApiBearerAuth, ApiOperation, ApiResponse, ApiTags } from '@nestjs/swagger';
import { InvalidatesCatalog } from '@libs/authz';
import { AgentsService } from '@libs/agents';
import { ErrorResponseDto } from '../dto/error.dto';
import { WriteTenancy } from '../tenancy';
import { AgentDto, AgentPageDto, CreateAgentDto, PageQueryDto, ReplaceAgentDto } from '../dto/admin.dto';

@ApiTags('admin')
@ApiBearerAuth()
@InvalidatesCatalog()
@Controller('v1/admin/agents')
export class AgentsController {
  constructor(
    private readonly agents: AgentsService,
    private readonly tenancy: WriteTenancy,
  ) {}

  @Post()
  @ApiOperation({ summary: 'Create an agent (a runner bound to its config and policies)' })
  @ApiResponse({ status: 201, type: AgentDto })
  @ApiResponse({ status: 400, type: ErrorResponseDto })
  @ApiResponse({ status: 409, type: ErrorResponseDto })
  async create(@Body() body: CreateAgentDto, @Req() req: AuthenticatedRequest): Promise<AgentDto> {
    const { agent_id, workspace_id, ...input } = body;
    return this.agents.create(agent_id, input, this.tenancy.target(req, workspace_id));
  }

  @Get()
  @ApiOperation({ summary: 'List agents, cursor-paged' })
  @ApiResponse({ status: 200, type: AgentPageDto })
  async list(@Query() q: PageQueryDto, @Req() req: AuthenticatedRequest): Promise<AgentPageDto> {
    return this.agents.page(q.cursor ?? null, q.limit ?? 50, this.tenancy.scope(req));
  }

  @Get(':agent_id')
  @ApiOperation({ summary: 'An agent: its runner, config, policies and version' })
  @ApiResponse({ status: 200, type: AgentDto })
  @ApiResponse({ status: 404, type: ErrorResponseDto })
  async get(@Param('agent_id') agentId: string): Promise<AgentDto> {
    return this.agents.get(agentId);
  }

  @Put(':agent_id')
  @ApiOperation({ summary: 'Replace an agent; runs already started keep what they were given' })
  @ApiResponse({ status: 200, type: AgentDto })
  @ApiResponse({ status: 409, type: ErrorResponseDto, description: 'Version mismatch' })
  async replace(@Param('agent_id') agentId: string, @Body() body: ReplaceAgentDto): Promise<AgentDto> {
    const { version, ...input } = body;
    return this.agents.replace(agentId, input, version);
  }

  @Delete(':agent_id')
  @ApiOperation({ summary: 'Delete an agent; runs already started go on' })
  @HttpCode(204)
  @ApiResponse({ status: 204 })
  @ApiResponse({ status: 404, type: ErrorResponseDto })
  async remove(@Param('agent_id') agentId: string): Promise<void> {
    await this.agents.remove(agentId);
  }
}
