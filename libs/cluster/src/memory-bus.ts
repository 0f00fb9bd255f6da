import { SignalBusBase } from './signal-bus';

/**
 * One process (SQLite, the default there): delivery is synchronous and nothing is lost, so waits
 * need no poll — today's behaviour of the in-process signal port.
 */
export class MemorySignalBus extends SignalBusBase {
  readonly kind = 'memory' as const;
  readonly lossy = false;

  constructor() {
    super('SignalBus');
  }

  start(): Promise<void> {
    return Promise.resolve();
  }

  close(): Promise<void> {
    return Promise.resolve();
  }

  protected send(): void {
    // Never called: publish delivers locally and stops (lossy is false).
  }

  protected listen(): void {
    // Nothing to listen to outside this process.
  }

  protected connected(): boolean {
    return true;
  }
}
