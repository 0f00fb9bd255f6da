import { Body, Controller, Delete, Get, HttpCode, Param, Post, Put, Query, Req } from '@nestjs/common';
import { ApiBearerAuth, ApiOperation, ApiResponse, ApiTags } from '@nestjs/swagger';
import { InvalidatesCatalog } from '@libs/authz';
import { ModelRegistry } from '@libs/resources';
import { PageQueryDto } from '../dto/admin.dto';
import type { AuthenticatedRequest } from '@libs/auth';
import { ErrorResponseDto } from '../dto/error.dto';
import { WriteTenancy } from '../tenancy';
import { CreateModelDto, ModelDto, ModelPageDto, ReplaceModelDto } from '../dto/models.dto';

@ApiTags('admin')
@ApiBearerAuth()
@InvalidatesCatalog()
@Controller('v1/admin/models')
export class ModelsController {
  constructor(
    private readonly models: ModelRegistry,
    private readonly tenancy: WriteTenancy,
  ) {}

  @Post()
  @ApiOperation({ summary: 'Register a model: an OpenAI-compatible chat model or a /rerank model' })
  @ApiResponse({ status: 201, type: ModelDto })
  @ApiResponse({ status: 400, type: ErrorResponseDto })
  @ApiResponse({ status: 409, type: ErrorResponseDto })
  async create(@Body() body: CreateModelDto, @Req() req: AuthenticatedRequest): Promise<ModelDto> {
    const { model_id, workspace_id, shared, ...input } = body;
    return this.models.create(model_id, input, {
      workspace_id: this.tenancy.target(req, workspace_id),
      shared: this.tenancy.shared(req, shared),
    });
  }

  @Get()
  @ApiOperation({ summary: 'List models, cursor-paged' })
  @ApiResponse({ status: 200, type: ModelPageDto })
  async list(@Query() q: PageQueryDto, @Req() req: AuthenticatedRequest): Promise<ModelPageDto> {
    return this.models.page(q.cursor ?? null, q.limit ?? 50, this.tenancy.scope(req));
  }

  @Get(':model_id')
  @ApiOperation({ summary: 'A model: kind, endpoint, abilities (never its key)' })
  @ApiResponse({ status: 200, type: ModelDto })
  @ApiResponse({ status: 404, type: ErrorResponseDto })
  async get(@Param('model_id') modelId: string): Promise<ModelDto> {
    return this.models.get(modelId);
  }

  @Put(':model_id')
  @ApiOperation({ summary: 'Replace a model; runs keep their grant, their next calls use the new definition' })
  @ApiResponse({ status: 200, type: ModelDto })
  @ApiResponse({ status: 400, type: ErrorResponseDto })
  @ApiResponse({ status: 404, type: ErrorResponseDto })
  async replace(@Param('model_id') modelId: string, @Body() body: ReplaceModelDto): Promise<ModelDto> {
    return this.models.replace(modelId, body);
  }

  @Delete(':model_id')
  @ApiOperation({ summary: 'Delete a model; runs granted it get not_found on their next call' })
  @HttpCode(204)
  @ApiResponse({ status: 204 })
  @ApiResponse({ status: 404, type: ErrorResponseDto })
  async remove(@Param('model_id') modelId: string): Promise<void> {
    await this.models.remove(modelId);
  }
}
