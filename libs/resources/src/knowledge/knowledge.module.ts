import { Module } from '@nestjs/common';
import { KnowledgeUploads } from './knowledge-uploads';
import { KnowledgeService } from './knowledge.service';

@Module({ providers: [KnowledgeService, KnowledgeUploads], exports: [KnowledgeService, KnowledgeUploads] })
export class KnowledgeModule {}
