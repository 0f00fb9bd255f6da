import { Module } from '@nestjs/common';
import { ElicitationBroker } from './elicitation';
import { McpClientPool } from './mcp-client-pool';
import { ToolRegistryService } from './tool-registry.service';
import { ToolSourcesService } from './tool-sources.service';
import { ToolsService } from './tools.service';

@Module({
  providers: [McpClientPool, ToolRegistryService, ToolSourcesService, ToolsService, ElicitationBroker],
  exports: [ToolsService, ToolSourcesService, ElicitationBroker],
})
export class ToolsModule {}
