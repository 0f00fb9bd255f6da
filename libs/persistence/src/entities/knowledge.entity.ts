import { Column, Entity, Index, PrimaryColumn, PrimaryGeneratedColumn } from 'typeorm';
import { epochMs, type JsonObject } from './columns';

@Entity('knowledge_bases')
@Index('idx_knowledge_bases_workspace', ['workspace_id'])
export class KnowledgeBaseEntity {
  @PrimaryColumn({ type: 'varchar', length: 128 })
  kb_id!: string;

  /** The owning workspace (docs/tenancy.md). */
  @Column({ type: 'varchar', length: 64, default: 'default' })
  workspace_id!: string;

  /** Visible to the runs of every workspace, not only its own (docs/tenancy.md#resources). */
  @Column({ type: 'boolean', default: false })
  shared!: boolean;

  @Column({ type: 'varchar', length: 255 })
  name!: string;

  @Column({ type: 'text' })
  description!: string;

  /** Characters per chunk and characters shared by neighbouring chunks. */
  @Column({ type: 'integer' })
  chunk_size!: number;

  @Column({ type: 'integer' })
  chunk_overlap!: number;

  @Column({ type: 'bigint', transformer: epochMs })
  created_at!: number;

  @Column({ type: 'bigint', transformer: epochMs })
  updated_at!: number;
}

@Entity('kb_documents')
@Index('idx_kb_documents_kb', ['kb_id'])
// The documents of a knowledge base that are not ready (searches leave their chunks out): a partial
// index the migrations create.
@Index('idx_kb_documents_unready', { synchronize: false })
export class KbDocumentEntity {
  @PrimaryColumn({ type: 'varchar', length: 64 })
  document_id!: string;

  @Column({ type: 'varchar', length: 128 })
  kb_id!: string;

  @Column({ type: 'varchar', length: 255 })
  name!: string;

  @Column({ type: 'varchar', length: 64 })
  content_type!: string;

  @Column({ type: 'simple-json' })
  metadata!: JsonObject;

  @Column({ type: 'integer' })
  size!: number;

  @Column({ type: 'integer' })
  chunk_count!: number;

  @Column({ type: 'bigint', transformer: epochMs })
  created_at!: number;

  /**
   * `writing` while its chunks are written in batches, `ready` once all are (only ready documents
   * and their chunks are listed, counted or searched), `deleting` while its chunks are removed
   * (docs/models-tools-knowledge.md#uploads-in-batches).
   */
  @Column({ type: 'varchar', length: 16, default: 'ready' })
  status!: KbDocumentStatus;

  /** When its last batch was written (an upload older than the abandon age is abandoned). */
  @Column({ type: 'bigint', transformer: epochMs, default: 0 })
  updated_at!: number;
}

export type KbDocumentStatus = 'writing' | 'ready' | 'deleting';

/** Searchable chunks (SQLite FTS5 `kb_chunks_fts`, PostgreSQL tsvector index). */
@Entity('kb_chunks')
@Index('idx_kb_chunks_doc', ['document_id', 'position'])
export class KbChunkEntity {
  @PrimaryGeneratedColumn()
  id!: number;

  @Column({ type: 'varchar', length: 128 })
  kb_id!: string;

  @Column({ type: 'varchar', length: 64 })
  document_id!: string;

  @Column({ type: 'integer' })
  position!: number;

  @Column({ type: 'text' })
  content!: string;

  @Column({ type: 'simple-json' })
  metadata!: JsonObject;
}
