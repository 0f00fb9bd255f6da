import { Injectable } from '@nestjs/common';
import type { CatalogKnowledgeBase, CatalogModel, CatalogTool, ResourceCatalog } from '@libs/authz';
import { KnowledgeService } from './knowledge/knowledge.service';
import { ModelsService } from './models/models.service';
import { ToolsService } from './tools/tools.service';

/** The resource catalogue the snapshot builder and agent validation read: the three registries. */
@Injectable()
export class RegistryCatalog implements ResourceCatalog {
  constructor(
    private readonly modelsService: ModelsService,
    private readonly toolsService: ToolsService,
    private readonly knowledge: KnowledgeService,
  ) {}

  models(): Promise<CatalogModel[]> {
    return this.modelsService.catalog();
  }

  tools(): Promise<CatalogTool[]> {
    return this.toolsService.catalog();
  }

  knowledgeBases(): Promise<CatalogKnowledgeBase[]> {
    return this.knowledge.catalog();
  }
}
