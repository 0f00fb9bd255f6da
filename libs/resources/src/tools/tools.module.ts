import { Module } from '@nestjs/common';
import { McpClientPool } from './mcp-client-pool';
import { ToolRegistryService } from './tool-registry.service';
import { ToolSourcesService } from './tool-sources.service';
import { ToolsService } from './tools.service';

@Module({
  providers: [McpClientPool, ToolRegistryService, ToolSourcesService, ToolsService],
  exports: [ToolsService, ToolSourcesService],
})
export class ToolsModule {}
