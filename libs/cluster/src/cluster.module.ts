import { Module } from '@nestjs/common';
import { APP_CONFIG, type AppConfig } from '@libs/config';
import { DbSessions } from '@libs/persistence';
import { telemetry } from '@libs/telemetry';
import { createSignalBus, SIGNAL_BUS } from './bus-factory';
import { ProcessRegistry } from './process-registry';
import type { SignalBus } from './signal-bus';

/**
 * Several host processes on one database (docs/scale-out.md): the signal bus SIGNAL_BUS chose
 * (connected before the modules that subscribe start; closed at shutdown; its counters on
 * /metrics, docs/observability.md) and this process's row in the process registry.
 */
@Module({
  providers: [
    {
      provide: SIGNAL_BUS,
      inject: [APP_CONFIG, DbSessions],
      useFactory: async (config: AppConfig, sessions: DbSessions): Promise<SignalBus> => {
        const bus = createSignalBus(config, sessions);
        telemetry.signalBus(bus.kind, () => bus.stats());
        await bus.start();
        return bus;
      },
    },
    ProcessRegistry,
  ],
  exports: [SIGNAL_BUS, ProcessRegistry],
})
export class ClusterModule {}
