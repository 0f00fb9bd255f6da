import * as fs from 'node:fs';
import * as path from 'node:path';
import { Client } from 'pg';
import type { TestDatabase } from '../harness';

const ERROR_CODES = [
  'unauthenticated',
  'unauthorized',
  'not_found',
  'invalid_argument',
  'conflict',
  'payload_too_large',
  'rate_limited',
  'deadline_exceeded',
  'unavailable',
  'runtime_error',
];

/**
 * Why an HTTP answer breaks the fuzz properties, or null: no 5xx; every 4xx body is the error
 * model `{error: {code, message, retryable, details}}`; a 400/413 (the input was at fault) names
 * the field, in `details.field` or as the `field: rule` head of the message.
 */
export function httpViolation(status: number, text: string): string | null {
  if (status >= 500) {
    return `answered ${status} (${errorMessageOf(text)})`;
  }
  if (status < 400) {
    return null;
  }
  let body: any;
  try {
    body = JSON.parse(text);
  } catch {
    return `${status} body is not JSON`;
  }
  const e = body?.error;
  if (
    typeof e !== 'object' ||
    e === null ||
    !ERROR_CODES.includes(e.code) ||
    typeof e.message !== 'string' ||
    typeof e.retryable !== 'boolean' ||
    typeof e.details !== 'object' ||
    e.details === null
  ) {
    return `${status} body is not the error model`;
  }
  if (status === 400 || status === 413) {
    const field = e.details.field;
    const named = (typeof field === 'string' && field.length > 0) || /^[\w.[\]"-]+: /.test(e.message);
    if (!named) {
      return `${status} names no field (${String(e.message)})`;
    }
  }
  return null;
}

function errorMessageOf(text: string): string {
  try {
    const message = (JSON.parse(text) as { error?: { message?: unknown } }).error?.message;
    return typeof message === 'string' ? message : text.slice(0, 100);
  } catch {
    return text.slice(0, 100);
  }
}

/** Row counts of the host's tables, read straight from its database over one connection. */
export class RowCounter {
  private pg: Client | null = null;
  private sqlite: import('better-sqlite3').Database | null = null;

  constructor(
    private readonly db: TestDatabase,
    readonly tables: string[],
  ) {}

  async open(): Promise<void> {
    const url = await this.db.url();
    if (url) {
      this.pg = new Client({ connectionString: url });
      await this.pg.connect();
    } else {
      // eslint-disable-next-line @typescript-eslint/no-require-imports -- only the SQLite runs need the native module
      const Sqlite = require('better-sqlite3') as typeof import('better-sqlite3');
      this.sqlite = new Sqlite(path.join(this.db.dataDir, 'runner-host.sqlite'), {
        readonly: true,
        fileMustExist: true,
      });
    }
  }

  async counts(): Promise<Record<string, number>> {
    const sql = `SELECT ${this.tables.map((t) => `(SELECT count(*) FROM "${t}") AS "${t}"`).join(', ')}`;
    const row = this.pg
      ? ((await this.pg.query(sql)).rows[0] as Record<string, unknown>)
      : (this.sqlite!.prepare(sql).get() as Record<string, unknown>);
    return Object.fromEntries(this.tables.map((t) => [t, Number(row[t])]));
  }

  async close(): Promise<void> {
    await this.pg?.end();
    this.sqlite?.close();
  }
}

/** The tables whose counts differ, as "table a → b". */
export function countChanges(before: Record<string, number>, after: Record<string, number>): string[] {
  return Object.keys(before)
    .filter((t) => before[t] !== after[t])
    .map((t) => `${t} ${before[t]} → ${after[t]}`);
}

/** Resident set size of a process in MiB (Linux /proc). */
export function rssMiB(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) / 1024 : NaN;
}

/** Host RSS may grow by this much over a whole fuzz file (caches, JIT, pools) and no more. */
export const RSS_GROWTH_LIMIT_MIB = 400;
