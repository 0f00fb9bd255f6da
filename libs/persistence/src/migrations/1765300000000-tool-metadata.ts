import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * What an MCP server says about a tool besides its input schema — title, annotations (read-only
 * and destructive hints), output schema, task support — kept with the tool as one JSON object
 * (`{}` for tools listed before, and for HTTP tools). Same SQL on both dialects.
 */
export class ToolMetadata1765300000000 implements MigrationInterface {
  name = 'ToolMetadata1765300000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE "tools" ADD COLUMN "metadata" TEXT NOT NULL DEFAULT '{}'`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE "tools" DROP COLUMN "metadata"`);
  }
}
