import { GlobalAdminOnly } from '@libs/auth';
import { Controller, Get } from '@nestjs/common';
import { ApiBearerAuth, ApiOperation, ApiResponse, ApiTags } from '@nestjs/swagger';
import { RunnerCatalogService } from '@libs/runner-gateway';
import { RunnerDto } from '../dto/admin.dto';

@ApiTags('admin')
@ApiBearerAuth()
@GlobalAdminOnly()
@Controller('v1/admin/runners')
export class RunnersController {
  constructor(private readonly catalog: RunnerCatalogService) {}

  @Get()
  @ApiOperation({ summary: 'Runners known to the host, with their manifests and connection state' })
  @ApiResponse({ status: 200, type: [RunnerDto] })
  async list(): Promise<RunnerDto[]> {
    return this.catalog.list();
  }
}
