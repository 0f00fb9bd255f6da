/**
 * What admission reads of a conversation before its commit, in one statement on PostgreSQL: the
 * conversation's situation (STEERING_SQL.situation), the latest seq of its thread
 * (SQL.latestThreadSeq), the entries of the run's state scopes (SQL.stateEntries, each scope
 * its own limit) and the catalogue version row (CatalogVersions.seed). On PostgreSQL every
 * statement is a socket write and a round trip of its own (about 85 µs of host CPU per write,
 * docs/benchmarks.md round 13); the reads are one here (docs/benchmarks.md, round 14 wt-pgc1r14;
 * the version row since round 18). SQLite reads in process: it runs the three statements of the
 * conversation as before (admissionReadsApart), one read unit, and reads the version row apart.
 */
import type { ConversationScope } from '../repositories/context.repository';
import { reading, SQL, stmt } from './hot-sql';
import {
  situationFromRow,
  situationOf,
  situationParams,
  type ConversationRef,
  type ConversationSituation,
} from './steering-rows';
import { SITUATION } from './steering-sql';
import { one, rows, type Unit } from './unit';

export interface AdmissionReads {
  situation: ConversationSituation;
  /** The thread's latest transcript seq; null when it has none. */
  latest_seq: number | null;
  /** The entries of each scope key read, in key order, at most `limit` per key, by state key. */
  state: Map<string, { state_key: string; value: string }[]>;
  /**
   * The catalogue version row (CatalogVersions), read by the same statement on PostgreSQL: the
   * admission's version read needs no statement of its own. Absent on SQLite.
   */
  catalog_version?: number;
}

/**
 * PostgreSQL only (SQLite runs admissionReadsApart). One row per state entry, the situation and
 * the thread's latest seq on every row; no entry: one row with null entry columns. Parameters: the
 * thread (agent, conversation id, workspace, thread), the situation's (situationParams), the
 * scope keys (JSON array), the limit per key.
 */
export const ADMISSION_READS = reading(
  stmt(
    'admission_reads',
    `SELECT 1 AS "postgresql_only"`,
    `SELECT sit."run_id", sit."queued", sit."n",
       (SELECT MAX("seq") FROM "transcript"
         WHERE "agent_id" = ? AND "conversation_id" = ? AND "workspace_id" IS NOT DISTINCT FROM ?
           AND "thread_id" IS NOT DISTINCT FROM ?) AS "max",
       (SELECT "version" FROM "catalog_version" WHERE "id" = 1) AS "catalog_version",
       st."scope_key", st."state_key", st."value"
     FROM (${SITUATION}) AS sit
     LEFT JOIN LATERAL (
       SELECT k."scope_key", k."o", e."state_key", e."value"
       FROM json_array_elements_text(?::json) WITH ORDINALITY AS k("scope_key", "o")
       CROSS JOIN LATERAL (SELECT "state_key", "value" FROM "state_entries" WHERE "scope_key" = k."scope_key"
         ORDER BY "state_key" ASC LIMIT ?) AS e
     ) AS st ON true
     ORDER BY st."o" ASC, st."state_key" ASC`,
  ),
  'runs',
  'steering_items',
  'transcript',
  'state_entries',
  'catalog_version',
);

function threadParams(t: ConversationScope): (string | null)[] {
  return [t.agent_id, t.conversation_id, t.workspace_id, t.thread_id];
}

function seqOf(row: { max: number | string | null } | undefined): number | null {
  return row?.max === null || row?.max === undefined ? null : Number(row.max);
}

/** The three reads as one statement (PostgreSQL). */
export function* admissionReadsUnit(
  c: ConversationRef,
  thread: ConversationScope,
  scopeKeys: readonly string[],
  limit: number,
): Unit<AdmissionReads> {
  const found = yield* rows<{
    run_id: string | null;
    queued: number | string;
    n: number | string;
    max: number | string | null;
    catalog_version: number | string;
    scope_key: string | null;
    state_key: string | null;
    value: string | null;
  }>(ADMISSION_READS, [...threadParams(thread), ...situationParams(c), JSON.stringify(scopeKeys), limit]);
  const state = new Map<string, { state_key: string; value: string }[]>(scopeKeys.map((k) => [k, []]));
  for (const r of found) {
    if (r.scope_key !== null && r.state_key !== null) {
      state.get(r.scope_key)?.push({ state_key: r.state_key, value: r.value! });
    }
  }
  return {
    situation: situationFromRow(found[0]),
    latest_seq: seqOf(found[0]),
    state,
    catalog_version: Number(found[0].catalog_version),
  };
}

/** The same reads as their own statements (SQLite, in process: no round trip to save). */
export function* admissionReadsApart(
  c: ConversationRef,
  thread: ConversationScope,
  scopeKeys: readonly string[],
  limit: number,
): Unit<AdmissionReads> {
  const situation = yield* situationOf(c);
  const state = new Map<string, { state_key: string; value: string }[]>();
  for (const k of scopeKeys) {
    state.set(k, yield* rows<{ state_key: string; value: string }>(SQL.stateEntries, [k, limit]));
  }
  const latest_seq = seqOf(yield* one<{ max: number | string | null }>(SQL.latestThreadSeq, threadParams(thread)));
  return { situation, latest_seq, state };
}
