import { GlobalAdminOnly } from '@libs/auth';
import { Body, Controller, Delete, Get, HttpCode, Param, Post } from '@nestjs/common';
import { ApiBearerAuth, ApiOperation, ApiResponse, ApiTags } from '@nestjs/swagger';
import { InvalidatesCatalog } from '@libs/authz';
import { pluginIdOf } from '@libs/protocol';
import { PluginsService, RunnerConnections } from '@libs/runner-gateway';
import { ErrorResponseDto } from '../dto/error.dto';
import { PluginDto, PluginWithTokenDto, RegisterPluginDto } from '../dto/admin.dto';

@ApiTags('admin')
@ApiBearerAuth()
@InvalidatesCatalog()
@GlobalAdminOnly()
@Controller('v1/admin/plugins')
export class PluginsController {
  constructor(
    private readonly plugins: PluginsService,
    private readonly connections: RunnerConnections,
  ) {}

  @Post()
  @ApiOperation({ summary: 'Register a runner plugin and issue its token (shown once)' })
  @ApiResponse({ status: 201, type: PluginWithTokenDto })
  @ApiResponse({ status: 409, type: ErrorResponseDto })
  async register(@Body() body: RegisterPluginDto): Promise<PluginWithTokenDto> {
    return this.plugins.register(body.author, body.name);
  }

  @Get()
  @ApiOperation({ summary: 'List plugin registrations (token prefixes only)' })
  @ApiResponse({ status: 200, type: [PluginDto] })
  async list(): Promise<PluginDto[]> {
    return this.plugins.list();
  }

  @Post(':author/:name/token')
  @ApiOperation({ summary: 'Issue a new token; the old one stops working' })
  @ApiResponse({ status: 201, type: PluginWithTokenDto })
  @ApiResponse({ status: 404, type: ErrorResponseDto })
  async rotate(@Param('author') author: string, @Param('name') name: string): Promise<PluginWithTokenDto> {
    return this.plugins.rotateToken(pluginIdOf(author, name));
  }

  @Delete(':author/:name')
  @HttpCode(204)
  @ApiOperation({ summary: 'Remove a plugin; its live connection is closed' })
  @ApiResponse({ status: 204 })
  @ApiResponse({ status: 404, type: ErrorResponseDto })
  async remove(@Param('author') author: string, @Param('name') name: string): Promise<void> {
    const pluginId = pluginIdOf(author, name);
    await this.plugins.remove(pluginId);
    const session = this.connections.session(pluginId);
    if (session) {
      this.connections.detach(session, 'plugin removed by an admin');
      session.close('plugin removed by an admin');
    }
  }
}
