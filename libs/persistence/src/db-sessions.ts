import { randomUUID } from 'node:crypto';
import type { Client, Pool, PoolClient } from 'pg';

/** What a host connection to PostgreSQL is for (the last word of its `application_name`). */
export type DbSessionRole = 'writer' | 'reader' | 'pool' | 'bus';

/** First word of every host connection's `application_name` (docs/scale-out.md#sessions-of-a-paused-process). */
export const SESSION_PREFIX = 'runner-host';

/**
 * `runner-host <process id> <role>`: at most 59 bytes for a UUID, under PostgreSQL's 63. The sweep's
 * terminate matches its first two words (host-processes.repository.ts `terminateSessions`).
 */
export function sessionName(processId: string, role: DbSessionRole): string {
  return `${SESSION_PREFIX} ${processId} ${role}`;
}

/** The client's connection settings as pg keeps them (the name it connected with). */
type WithParameters = { connectionParameters?: { application_name?: unknown } };

/**
 * The identity this process's database sessions carry (docs/scale-out.md#sessions-of-a-paused-process):
 * every connection the host opens to PostgreSQL — the one writer, the hot readers' pool, TypeORM's
 * pool, the signal bus — names this process's registry id in its `application_name`, so that the
 * process that declares it dead can terminate exactly its sessions (and with them the row locks of
 * a transaction it left open when it was paused). The id is this object's: the process registry
 * registers under it and renames it when it registers again after being declared dead; a
 * connection made under the old name is renamed (`SET application_name`) before its next use.
 *
 * `idleInTransactionMs` (PROCESS_LEASE_MS − PROCESS_HEARTBEAT_MS in the host) is the net behind
 * the terminate: the server ends a session left idle in a transaction that long, by itself.
 */
export class DbSessions {
  private id: string;
  /** The name each client was last given (its connect name until renamed). */
  private readonly names = new WeakMap<object, string>();

  constructor(
    processId: string = randomUUID(),
    readonly idleInTransactionMs: number | null = null,
  ) {
    this.id = processId;
  }

  /** This process's registry id (the one its connections name). */
  get processId(): string {
    return this.id;
  }

  /** A new registry id (registered again after being declared dead): connections are renamed at their next use. */
  rename(processId: string): void {
    this.id = processId;
  }

  name(role: DbSessionRole): string {
    return sessionName(this.id, role);
  }

  /** The settings of a new connection of `role` (pg's client / pool options). */
  options(role: DbSessionRole): { application_name: string; idle_in_transaction_session_timeout?: number } {
    const timeout = this.idleInTransactionMs;
    return timeout && role !== 'bus'
      ? { application_name: this.name(role), idle_in_transaction_session_timeout: timeout }
      : { application_name: this.name(role) };
  }

  /**
   * Renames `client` when it carries an older id: the `SET` is queued on the client before the
   * caller's next query (pg runs a client's queries in order). Nothing when the name is current.
   * A failure is left to that next query (it fails the same way on a broken connection).
   */
  ensureNamed(client: Client | PoolClient, role: DbSessionRole): void {
    const want = this.name(role);
    const has = this.names.get(client) ?? connectedName(client);
    if (has === want) {
      return;
    }
    this.names.set(client, want);
    client.query(`SELECT set_config('application_name', $1, false)`, [want]).catch(() => undefined);
  }

  /** Every client of `pool` is renamed when it is handed out under an older id. */
  watch(pool: Pool, role: DbSessionRole): void {
    pool.on('acquire', (client) => this.ensureNamed(client, role));
  }
}

function connectedName(client: object): string | undefined {
  const name = (client as WithParameters).connectionParameters?.application_name;
  return typeof name === 'string' ? name : undefined;
}
