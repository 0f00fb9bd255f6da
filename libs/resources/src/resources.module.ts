import { Global, Module } from '@nestjs/common';
import { RESOURCE_CATALOG } from '@libs/authz';
import { KnowledgeModule } from './knowledge/knowledge.module';
import { ModelsModule } from './models/models.module';
import { RegistryCatalog } from './registry-catalog';
import { ToolsModule } from './tools/tools.module';

/** Models, tools and knowledge bases; provides the RESOURCE_CATALOG every grant is checked against. */
@Global()
@Module({
  imports: [ModelsModule, ToolsModule, KnowledgeModule],
  providers: [{ provide: RESOURCE_CATALOG, useClass: RegistryCatalog }],
  exports: [RESOURCE_CATALOG, ModelsModule, ToolsModule, KnowledgeModule],
})
export class ResourcesModule {}
