import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Knowledge documents written in batches (docs/models-tools-knowledge.md#uploads-in-batches): a
 * document's `status` — `writing` while its chunks are being written, `ready` once all of them
 * are (only `ready` documents and their chunks are listed, counted or searched), `deleting` while
 * its chunks are removed — and `updated_at`, the time of its last batch (an upload whose last batch
 * is older than the abandon age is another process's that died: PostgreSQL). Rows written before
 * this were written whole in one transaction: `ready`. Same SQL on both dialects.
 */
export class KbDocumentStatus1767660000000 implements MigrationInterface {
  name = 'KbDocumentStatus1767660000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE "kb_documents" ADD COLUMN "status" VARCHAR(16) NOT NULL DEFAULT 'ready'`);
    await q.query(`ALTER TABLE "kb_documents" ADD COLUMN "updated_at" BIGINT NOT NULL DEFAULT 0`);
    await q.query(`CREATE INDEX "idx_kb_documents_unready" ON "kb_documents" ("kb_id") WHERE "status" <> 'ready'`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP INDEX "idx_kb_documents_unready"`);
    await q.query(`ALTER TABLE "kb_documents" DROP COLUMN "updated_at"`);
    await q.query(`ALTER TABLE "kb_documents" DROP COLUMN "status"`);
  }
}
