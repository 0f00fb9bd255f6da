import { randomUUID } from 'node:crypto';

/**
 * A new run or event id: a UUID of version 7 (RFC 9562) — the first 48 bits are the Unix time in
 * milliseconds, the other 74 random (docs/protocol.md: run ids are UUIDs). Ids made later sort
 * later, so the rows of the runs of one group commit land in the same last pages of every index
 * keyed by run or event id instead of one random page each (docs/benchmarks.md: the SQLite
 * writer's pages per commit); nothing reads an order or a time from them.
 */
export function orderedUuid(now: number = Date.now()): string {
  const t = Math.max(0, Math.min(Math.floor(now), 0xffff_ffff_ffff))
    .toString(16)
    .padStart(12, '0');
  // randomUUID(): 8-4-4-4-12 hex with the version at index 14 and the RFC variant at index 19.
  return `${t.slice(0, 8)}-${t.slice(8, 12)}-7${randomUUID().slice(15)}`;
}
