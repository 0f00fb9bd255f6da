import { Module } from '@nestjs/common';
import { APP_CONFIG, type AppConfig } from '@libs/config';
import { createSignalBus, SIGNAL_BUS } from './bus-factory';
import { ProcessRegistry } from './process-registry';
import type { SignalBus } from './signal-bus';

/**
 * Several host processes on one database (docs/scale-out.md): the signal bus SIGNAL_BUS chose
 * (connected before the modules that subscribe start; closed at shutdown) and this process's row
 * in the process registry.
 */
@Module({
  providers: [
    {
      provide: SIGNAL_BUS,
      inject: [APP_CONFIG],
      useFactory: async (config: AppConfig): Promise<SignalBus> => {
        const bus = createSignalBus(config);
        await bus.start();
        return bus;
      },
    },
    ProcessRegistry,
  ],
  exports: [SIGNAL_BUS, ProcessRegistry],
})
export class ClusterModule {}
