import type { DataSource } from 'typeorm';

/**
 * The oldest PostgreSQL the host runs on (docs/deployment.md#postgresql-version), as
 * `server_version_num`: 14, for `pg_terminate_backend(pid, timeout)` (the dead-process sweep,
 * HostProcessesRepository.terminateSessions). The other features it uses are older: `AS
 * MATERIALIZED` CTEs (12), `ON CONFLICT` (9.5), transaction advisory locks, `LISTEN/NOTIFY`,
 * `SKIP LOCKED` (9.5), full-text search (`to_tsvector`, `plainto_tsquery`, `ts_rank`, GIN indexes),
 * `json`/`jsonb` operators and `LATERAL` (9.3–9.4).
 */
export const MIN_POSTGRES_VERSION_NUM = 140000;

/** "14", "9.6": the major version of a `server_version_num`. */
export function postgresMajor(versionNum: number): string {
  return versionNum >= 100000
    ? String(Math.floor(versionNum / 10000))
    : `${Math.floor(versionNum / 10000)}.${Math.floor(versionNum / 100) % 100}`;
}

/** Why the host refuses a server of this version, or null when it is recent enough. */
export function postgresVersionProblem(
  versionNum: number,
  version: string,
  minimum = MIN_POSTGRES_VERSION_NUM,
): string | null {
  if (!Number.isInteger(versionNum) || versionNum <= 0) {
    return `PostgreSQL: server_version_num "${String(versionNum)}" (server_version "${version}") is not a version number`;
  }
  if (versionNum >= minimum) {
    return null;
  }
  return (
    `PostgreSQL ${version} (server_version_num ${versionNum}) is older than the host needs: ` +
    `PostgreSQL ${postgresMajor(minimum)} or later (server_version_num >= ${minimum}; docs/deployment.md#postgresql-version)`
  );
}

/** A server older than the host needs: no retry helps (PersistenceModule stops the boot at once). */
export class PostgresVersionError extends Error {
  override readonly name = 'PostgresVersionError';
}

/** Reads the server's version and throws when it is older than `minimum` (at boot, before migrations). */
export async function checkPostgresVersion(
  ds: DataSource,
  minimum = MIN_POSTGRES_VERSION_NUM,
): Promise<{ versionNum: number; version: string }> {
  const rows: Array<{ num: string; version: string }> = await ds.query(
    `SELECT current_setting('server_version_num') AS "num", current_setting('server_version') AS "version"`,
  );
  const versionNum = Number(rows[0]?.num);
  const version = rows[0]?.version ?? '';
  const problem = postgresVersionProblem(versionNum, version, minimum);
  if (problem) {
    throw new PostgresVersionError(problem);
  }
  return { versionNum, version };
}
