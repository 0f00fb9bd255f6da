/**
 * Authorization snapshots stored once (docs/durability.md#what-a-run-row-holds): a run's frozen
 * snapshot is its grants — the same for every run of an agent with the same runner, policy and
 * scope keys — plus the few keys that name the run itself. The grants are written once to
 * `snapshots`, keyed by the SHA-256 of their JSON text (content-addressed, insert-if-absent); the
 * run row keeps that key (`snapshot_hash`) and its own keys (`authorization_run`, a few hundred
 * bytes). Reading joins the two back into the snapshot the run was admitted with, so its
 * `authorization_hash` (of the canonical JSON of the whole snapshot) still verifies.
 */
import { hash } from 'node:crypto';
import type { JsonObject } from '../entities';
import { batchableInsert, stmt } from './hot-sql';
import { exec, type SqlValue, type Unit } from './unit';

/** The snapshot keys that differ run by run or conversation by conversation (state scope keys; docs/protocol.md#the-authorization-snapshot). */
export const PER_RUN_SNAPSHOT_KEYS: readonly string[] = ['run_id', 'scope', 'state', 'deadline_at_ms'];

export const SNAPSHOT_SQL = {
  /** Insert-if-absent: the same hash is the same content. */
  insert: batchableInsert('insert_snapshot', 'snapshots', ['hash', 'content', 'created_at'], ' ON CONFLICT DO NOTHING'),
  /** A run's snapshot parts (the host API gate and the admin view read it through the repository). */
  ofRun: stmt(
    'snapshot_of_run',
    `SELECT r."authorization_hash", r."authorization_run", s."content" FROM "runs" AS r
     LEFT JOIN "snapshots" AS s ON s."hash" = r."snapshot_hash" WHERE r."run_id" = ?`,
  ),
} as const;

export interface SplitSnapshot {
  /** SHA-256 (hex) of `content`: the key of the shared part. */
  hash: string;
  /** JSON text of the keys shared between runs. */
  content: string;
  /** JSON text of the run's own keys. */
  run: string;
}

export function splitSnapshot(snapshot: JsonObject): SplitSnapshot {
  const shared: JsonObject = {};
  const own: JsonObject = {};
  for (const [k, v] of Object.entries(snapshot)) {
    if (v === undefined) {
      continue;
    }
    (PER_RUN_SNAPSHOT_KEYS.includes(k) ? own : shared)[k] = v;
  }
  const content = JSON.stringify(shared);
  return { hash: hash('sha256', content, 'hex'), content, run: JSON.stringify(own) };
}

/** The whole snapshot from its stored parts; null when the run has none. */
export function joinSnapshot(content: string | null | undefined, run: string | null | undefined): JsonObject | null {
  if (content === null || content === undefined) {
    return null;
  }
  const own = run ? (JSON.parse(run) as JsonObject) : {};
  return { ...(JSON.parse(content) as JsonObject), ...own };
}

/**
 * The run-row columns of a snapshot (`snapshot_hash`, `authorization_run`), after writing its
 * shared part if absent.
 */
export function* storeSnapshotUnit(snapshot: JsonObject | null | undefined, at: number): Unit<[SqlValue, SqlValue]> {
  if (!snapshot) {
    return [null, null];
  }
  const s = splitSnapshot(snapshot);
  yield* exec(SNAPSHOT_SQL.insert, [s.hash, s.content, at]);
  return [s.hash, s.run];
}
