import { Body, Controller, Delete, Get, HttpCode, Param, Post, Req } from '@nestjs/common';
import { ApiBearerAuth, ApiOperation, ApiResponse, ApiTags } from '@nestjs/swagger';
import { ApiKeysService, type AuthenticatedRequest } from '@libs/auth';
import { ErrorResponseDto } from '../dto/error.dto';
import { ApiKeyDto, ApiKeyWithSecretDto, CreateApiKeyDto } from '../dto/admin.dto';

@ApiTags('admin')
@ApiBearerAuth()
@Controller('v1/admin/api-keys')
export class ApiKeysController {
  constructor(private readonly keys: ApiKeysService) {}

  @Post()
  @ApiOperation({ summary: 'Create an API key (platform or admin); the key is shown once' })
  @ApiResponse({ status: 201, type: ApiKeyWithSecretDto })
  async create(@Body() body: CreateApiKeyDto): Promise<ApiKeyWithSecretDto> {
    return this.keys.create(body.name, body.role);
  }

  @Get()
  @ApiOperation({ summary: 'List API keys (never the keys themselves)' })
  @ApiResponse({ status: 200, type: [ApiKeyDto] })
  async list(): Promise<ApiKeyDto[]> {
    return this.keys.list();
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
