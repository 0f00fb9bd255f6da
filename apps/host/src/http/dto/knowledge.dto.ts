import { SharedOfRow, SharedOfWrite, WorkspaceOfRow, WorkspaceOfWrite } from './owner.dto';
import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { IsIn, IsInt, IsNotEmpty, IsOptional, IsString, MaxLength } from 'class-validator';
import { IsJsonMap } from './rules';

const obj = { type: 'object', additionalProperties: true } as const;

export class CreateKnowledgeBaseDto {
  @ApiProperty({ example: 'product-docs', description: '1-128 letters, digits, ".", "_", ":" or "-"' })
  @IsString()
  @IsNotEmpty()
  @MaxLength(128)
  kb_id!: string;

  @WorkspaceOfWrite() workspace_id?: string;
  @SharedOfWrite() shared?: boolean;

  @ApiProperty({ example: 'Product documentation' }) @IsString() @IsNotEmpty() @MaxLength(255) name!: string;
  @ApiPropertyOptional() @IsOptional() @IsString() @MaxLength(10_000) description?: string;

  @ApiPropertyOptional({ default: 1000, minimum: 100, maximum: 10_000, description: 'Characters per chunk' })
  @IsOptional()
  @IsInt()
  chunk_size?: number;

  @ApiPropertyOptional({
    default: 150,
    minimum: 0,
    description: 'Characters neighbouring chunks share; at most half of chunk_size',
  })
  @IsOptional()
  @IsInt()
  chunk_overlap?: number;
}

export class KnowledgeBaseDto {
  @ApiProperty() kb_id!: string;
  @WorkspaceOfRow() workspace_id!: string;
  @SharedOfRow() shared!: boolean;
  @ApiProperty() name!: string;
  @ApiProperty() description!: string;
  @ApiProperty({ example: 'fulltext', description: 'Retrieval kind, as runners see it in their resources' })
  kb_type!: string;
  @ApiProperty() chunk_size!: number;
  @ApiProperty() chunk_overlap!: number;
  @ApiProperty() document_count!: number;
  @ApiProperty() chunk_count!: number;
  @ApiProperty() created_at!: string;
  @ApiProperty() updated_at!: string;
}

export class KnowledgeBasePageDto {
  @ApiProperty({ type: [KnowledgeBaseDto] }) items!: KnowledgeBaseDto[];
  @ApiProperty({ nullable: true, type: String }) next_cursor!: string | null;
}

export class UploadDocumentDto {
  @ApiProperty({ example: 'install.md' }) @IsString() @IsNotEmpty() @MaxLength(255) name!: string;

  @ApiProperty({ enum: ['text/plain', 'text/markdown'] })
  @IsIn(['text/plain', 'text/markdown'])
  content_type!: string;

  @ApiProperty({ description: 'The document text (UTF-8, at most 5 MiB)' }) @IsString() content!: string;

  @ApiPropertyOptional({
    ...obj,
    description: 'Flat {key: string | number | boolean | null}; copied onto every chunk, usable as a retrieval filter',
  })
  @IsOptional()
  @IsJsonMap()
  metadata?: Record<string, unknown>;
}

export class DocumentDto {
  @ApiProperty() document_id!: string;
  @ApiProperty() kb_id!: string;
  @ApiProperty() name!: string;
  @ApiProperty({ enum: ['text/plain', 'text/markdown'] }) content_type!: string;
  @ApiProperty(obj) metadata!: Record<string, unknown>;
  @ApiProperty({ description: 'Bytes of UTF-8 content' }) size!: number;
  @ApiProperty() chunk_count!: number;
  @ApiProperty() created_at!: string;
}

export class DocumentPageDto {
  @ApiProperty({ type: [DocumentDto] }) items!: DocumentDto[];
  @ApiProperty({ nullable: true, type: String }) next_cursor!: string | null;
}

export class KnowledgeSearchDto {
  @ApiProperty({ example: 'how do I install it', maxLength: 1000 }) @IsString() query_text!: string;
  @ApiPropertyOptional({ default: 5, minimum: 1, maximum: 50 }) @IsOptional() @IsInt() top_k?: number;
  @ApiPropertyOptional({ ...obj, description: 'Equality on chunk metadata keys, e.g. {"document_id": "doc_…"}' })
  @IsOptional()
  @IsJsonMap()
  filters?: Record<string, unknown>;
}

export class RetrievalEntryDto {
  @ApiProperty({ description: 'Chunk id' }) id!: string;
  @ApiProperty({ type: 'array', items: obj, example: [{ type: 'text', text: '…' }] }) content!: object[];
  @ApiProperty({
    ...obj,
    description: 'Document metadata + {document_id, document_name, position, heading?}',
  })
  metadata!: Record<string, unknown>;
  @ApiProperty({ description: '1 - score' }) distance!: number;
  @ApiProperty({ description: 'Relevance in [0, 1), higher is better' }) score!: number;
}

export class KnowledgeSearchResultDto {
  @ApiProperty({ type: [RetrievalEntryDto] }) results!: RetrievalEntryDto[];
}
