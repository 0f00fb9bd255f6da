import { Injectable } from '@nestjs/common';

/**
 * The version of everything admission reads from memory (agents, runners' policies, the resource
 * catalogue). An admin write bumps it before its answer is sent, so the next admission reloads:
 * a deleted model or tool is never granted to a later run. In one process a counter is enough;
 * several host processes would back `current()`/`bump()` with a shared signal (a Redis counter
 * or a PostgreSQL NOTIFY) — this class is that seam.
 */
@Injectable()
export class CatalogVersions {
  private version = 0;

  current(): number {
    return this.version;
  }

  bump(): void {
    this.version++;
  }
}
