import type { AppConfig } from '@libs/config';
import type { DbSessions } from '@libs/persistence';
import { MemorySignalBus } from './memory-bus';
import { NatsSignalBus } from './nats-bus';
import { PostgresSignalBus } from './postgres-bus';
import type { SignalBus } from './signal-bus';

export const SIGNAL_BUS = Symbol('SIGNAL_BUS');

/**
 * The bus SIGNAL_BUS chose (validated at boot by loadConfig: a shared bus implies PostgreSQL); on
 * PostgreSQL its connection carries this process's session name (`sessions`).
 */
export function createSignalBus(config: Pick<AppConfig, 'cluster' | 'database'>, sessions?: DbSessions): SignalBus {
  const { cluster, database } = config;
  switch (cluster.signalBus) {
    case 'memory':
      return new MemorySignalBus();
    case 'postgres':
      if (database.type !== 'postgres') {
        throw new Error('SIGNAL_BUS=postgres needs DATABASE_URL=postgres://…');
      }
      return new PostgresSignalBus({
        url: database.url,
        ...(sessions ? { applicationName: () => sessions.name('bus') } : {}),
      });
    case 'nats':
      if (!cluster.nats) {
        throw new Error('SIGNAL_BUS=nats needs NATS_URL');
      }
      return new NatsSignalBus({ servers: cluster.nats.servers, subjectPrefix: cluster.nats.subjectPrefix });
  }
}
