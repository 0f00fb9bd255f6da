import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The process registry (docs/scale-out.md#process-registry): one row per live host process on
 * this database, heartbeated in one statement per tick; a handful of rows, so no index beyond the
 * key (the sweep scans them all). Same SQL on both dialects.
 */
export class HostProcesses1767500000000 implements MigrationInterface {
  name = 'HostProcesses1767500000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`CREATE TABLE "host_processes" (
      "id" VARCHAR(64) PRIMARY KEY NOT NULL,
      "instance" VARCHAR(128) NOT NULL,
      "http_address" VARCHAR(255) NOT NULL,
      "grpc_address" VARCHAR(255) NOT NULL,
      "state" VARCHAR(16) NOT NULL,
      "started_at" BIGINT NOT NULL,
      "heartbeat_at" BIGINT NOT NULL)`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE "host_processes"`);
  }
}
