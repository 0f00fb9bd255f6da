/*
 * A `-r` preload for the host child that counts the statements it sends to PostgreSQL (node-postgres
 * has no pipelining: each one is a round trip on its connection). It wraps pg's Client.query and
 * counts per connection role and per statement, the role named by who uses the connection:
 * `client:<file>` for a connection of its own (the hot writer: `client:pg-driver.js`), `pool:<file>`
 * for a pool's (the hot readers: `pool:pg-driver.js`; TypeORM's: `pool:PostgresDriver.js`), <file>
 * the first caller outside pg. A statement is its prepared name, or the start of its text.
 *
 *   BENCH_HOST_NODE_ARGS="-r $PWD/dist/bench/common/pg-statement-count.js" \
 *   PG_STATEMENT_COUNT_FILE=/tmp/counts.json node dist/bench/dispatch/main.js --db postgres …
 *
 * The counts are written as JSON to PG_STATEMENT_COUNT_FILE (or printed on stderr without it) when
 * the process exits or gets SIGTERM; every SIGWINCH (ignored by default; the host takes
 * SIGUSR2 as a shutdown signal) writes the counts since the previous one to
 * `<file>.1`, `<file>.2`, … and starts again from zero, so two signals sent while a bench runs one
 * level cut out that level's counts. Per run: divide by the runs ended in the phase (the writer's
 * `hot_finish_run*` statements): bench/common/README.md.
 */
import * as fs from 'node:fs';
import { createRequire } from 'node:module';
import * as path from 'node:path';
import { performance } from 'node:perf_hooks';

interface Counted {
  /** Statements sent, per role. */
  roles: Record<string, number>;
  /**
   * Round trips, per role: one per `Client.query`, but for a statement written on a pipelined
   * connection while another's answer is still awaited (`BEGIN` / `COMMIT` riding on the writer's
   * statements: libs/persistence/src/hot/pg-driver.ts).
   */
  trips: Record<string, number>;
  /** Statements sent, per role and statement. */
  statements: Record<string, Record<string, number>>;
  /**
   * Milliseconds with at least one statement awaited, per role (summed over the role's
   * connections): the time the host waited on the database, loopback and server included.
   */
  waitMs: Record<string, number>;
}

const ROLE = Symbol('pg-statement-count.role');

const IN_FLIGHT = Symbol('pg-statement-count.in-flight');
const SINCE = Symbol('pg-statement-count.since');

type Tagged = { [ROLE]?: string };
type Pipelined = { pipeline?: boolean; [IN_FLIGHT]?: number; [SINCE]?: number };

let counted: Counted = { roles: {}, trips: {}, statements: {}, waitMs: {} };

/** The first file of the stack that is neither pg nor this preload: who uses the connection. */
function caller(): string {
  const lines = (new Error().stack ?? '').split('\n').slice(1);
  for (const line of lines) {
    const m = /\(?([^()\s]+):\d+:\d+\)?$/.exec(line.trim());
    const file = m?.[1];
    if (
      !file ||
      file.startsWith('node:') ||
      file === __filename ||
      /[\\/]node_modules[\\/](pg|pg-pool|pg-protocol)[\\/]/.test(file)
    ) {
      continue;
    }
    return path.basename(file);
  }
  return 'unknown';
}

function statementOf(args: unknown[]): string {
  const q = args[0] as string | { name?: string; text?: string } | undefined;
  if (typeof q === 'string') {
    return q.replace(/\s+/g, ' ').trim().slice(0, 60);
  }
  if (q && typeof q === 'object') {
    return q.name ?? (q.text ?? '').replace(/\s+/g, ' ').trim().slice(0, 60);
  }
  return String(q);
}

function count(role: string, statement: string): void {
  counted.roles[role] = (counted.roles[role] ?? 0) + 1;
  const per = (counted.statements[role] ??= {});
  per[statement] = (per[statement] ?? 0) + 1;
}

function write(file = process.env.PG_STATEMENT_COUNT_FILE): void {
  const text = JSON.stringify(counted, null, 2);
  if (file) {
    fs.writeFileSync(file, text);
  } else {
    process.stderr.write(`pg statements: ${text}\n`);
  }
}

function install(): void {
  let pg: typeof import('pg');
  try {
    // The host's pg (this file may be compiled elsewhere): resolved from the main script first.
    const from = [path.dirname(process.argv[1] ?? '.'), process.cwd(), __dirname];
    const load = createRequire(__filename);
    pg = load(load.resolve('pg', { paths: from })) as typeof import('pg');
  } catch {
    return; // no pg here: nothing to count
  }
  const client = pg.Client.prototype as unknown as { query: (...a: unknown[]) => unknown } & Tagged;
  const query = client.query;
  client.query = function (this: Tagged & Pipelined, ...args: unknown[]): unknown {
    this[ROLE] ??= `client:${caller()}`;
    const role = this[ROLE];
    // A statement written on a pipelined connection while another one's answer is awaited rides
    // in that round trip (pg-driver.ts: BEGIN with the group's first statement, COMMIT with its last).
    const inFlight = this[IN_FLIGHT] ?? 0;
    if (!(this.pipeline && inFlight > 0)) {
      counted.trips[role] = (counted.trips[role] ?? 0) + 1;
    }
    count(role, statementOf(args));
    this[IN_FLIGHT] = inFlight + 1;
    if (inFlight === 0) {
      this[SINCE] = performance.now();
    }
    const done = (): void => {
      this[IN_FLIGHT] = (this[IN_FLIGHT] ?? 1) - 1;
      if (this[IN_FLIGHT] === 0) {
        counted.waitMs[role] = (counted.waitMs[role] ?? 0) + performance.now() - (this[SINCE] ?? 0);
      }
    };
    // Answered by a callback (pg-pool's query), or by the promise pg returns without one.
    const last = args.length - 1;
    const callback = args[last];
    if (typeof callback === 'function') {
      args[last] = (...a: unknown[]): unknown => {
        done();
        return (callback as (...x: unknown[]) => unknown)(...a);
      };
    }
    const result = query.apply(this, args);
    if (result instanceof Promise) {
      result.then(done, done);
    } else if (typeof callback !== 'function') {
      done(); // a submittable answered through its own events: not timed
    }
    return result;
  };
  // A pool's connections are named when the pool hands them out (its first user names the pool).
  const pool = Object.getPrototypeOf(pg.Pool.prototype) as { connect: (...a: unknown[]) => unknown } & Tagged;
  const connect = pool.connect;
  pool.connect = function (this: Tagged, ...args: unknown[]): unknown {
    const role = (this[ROLE] ??= `pool:${caller()}`);
    const tag = (c: unknown): void => {
      if (c && typeof c === 'object') {
        (c as Tagged)[ROLE] = role;
      }
    };
    const cb = args[0];
    if (typeof cb === 'function') {
      return connect.call(this, (err: unknown, c: unknown, done: unknown) => {
        tag(c);
        (cb as (...a: unknown[]) => void)(err, c, done);
      });
    }
    return (connect.apply(this, args) as Promise<unknown>).then((c) => {
      tag(c);
      return c;
    });
  };
  process.on('exit', () => write());
  // The benches stop the host with SIGTERM (SIGKILL after a grace): the counts so far, in case.
  // The host has SIGTERM handlers of its own (apps/host/src/main.ts), so this one changes nothing.
  process.on('SIGTERM', () => write());
  let phase = 0;
  process.on('SIGWINCH', () => {
    const file = process.env.PG_STATEMENT_COUNT_FILE;
    write(file ? `${file}.${++phase}` : undefined);
    counted = { roles: {}, trips: {}, statements: {}, waitMs: {} };
  });
}

install();
