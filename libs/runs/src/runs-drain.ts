import { Injectable } from '@nestjs/common';
import { ActiveRuns } from './active-runs';
import { ConversationDispatcher } from './concurrency/conversation-dispatcher';
import { RunLifecycleService } from './run-lifecycle.service';

/**
 * The runs' side of a graceful shutdown (docs/deployment.md#graceful-shutdown), for the host's
 * shutdown sequence: start no waiting run any more (they stay queued for the other processes),
 * wait for the active runs to finish, then end what is left `interrupted`.
 */
@Injectable()
export class RunsDrain {
  constructor(
    private readonly active: ActiveRuns,
    private readonly dispatcher: ConversationDispatcher,
    private readonly lifecycle: RunLifecycleService,
  ) {}

  /** Runs active in this process now. */
  get activeRuns(): number {
    return this.active.all().length;
  }

  /** The conversation dispatcher starts nothing more; resolves once its drivers stopped. */
  stopStarting(): Promise<void> {
    return this.dispatcher.pause();
  }

  /** Resolves when no run is active here, or when `signal` aborts. */
  idle(signal: AbortSignal): Promise<void> {
    return this.lifecycle.idle(signal);
  }

  /** Ends every run still active here `interrupted` (terminal result written); how many. */
  interruptAll(why: string): Promise<number> {
    return this.lifecycle.interruptAll(why);
  }
}
