/**
 * Registries of short-lived values (a run's channel, its active record, a reader's task) that live
 * as long as the process, without keeping what they removed alive for the young-generation GC.
 *
 * Why (docs/benchmarks.md, "Ended runs kept for the scavenger: outgrown tables of long-lived maps"):
 * when a `Map` or `Set` outgrows, shrinks or clears its hash table, V8 allocates a new table and
 * leaves the old one holding the entries it had. A long-lived map's table lives in the old
 * generation, and an old-generation object is a root for every scavenge until the next full GC,
 * dead or not. So each value that was in the map when its table was replaced — at c1, the run in
 * flight — stays reachable for scavenges after it was deleted: the scavenger copies it and
 * everything it references, then promotes it, and only a full GC frees it. Here each value sits in
 * a cell of its own that `delete` (and `clear`) empties: an outgrown table keeps only empty cells
 * and its keys, which are primitives.
 */
interface Cell<V> {
  value: V | undefined;
}

/** A `Map` with primitive keys whose removed values are released at once (see above). */
export class ReleasingMap<K extends string | number, V> {
  private readonly cells = new Map<K, Cell<V>>();

  get size(): number {
    return this.cells.size;
  }

  has(key: K): boolean {
    return this.cells.has(key);
  }

  get(key: K): V | undefined {
    return this.cells.get(key)?.value;
  }

  set(key: K, value: V): this {
    const cell = this.cells.get(key);
    if (cell === undefined) {
      this.cells.set(key, { value });
    } else {
      cell.value = value;
    }
    return this;
  }

  delete(key: K): boolean {
    const cell = this.cells.get(key);
    if (cell === undefined) {
      return false;
    }
    cell.value = undefined;
    return this.cells.delete(key);
  }

  clear(): void {
    for (const cell of this.cells.values()) {
      cell.value = undefined;
    }
    this.cells.clear();
  }

  *values(): IterableIterator<V> {
    for (const cell of this.cells.values()) {
      yield cell.value as V;
    }
  }

  *entries(): IterableIterator<[K, V]> {
    for (const [key, cell] of this.cells) {
      yield [key, cell.value as V];
    }
  }

  [Symbol.iterator](): IterableIterator<[K, V]> {
    return this.entries();
  }
}

/**
 * A set of values of any kind (closures, responses) that releases a removed value at once (see
 * above): `add` answers the member's handle, a number, and the member is removed by it — so no
 * table holds the value as a key.
 */
export class ReleasingSet<T> {
  private readonly members = new ReleasingMap<number, T>();
  private next = 0;

  get size(): number {
    return this.members.size;
  }

  /** Adds `value` (again, if it is a member already) and answers its handle for `delete`. */
  add(value: T): number {
    const handle = this.next++;
    this.members.set(handle, value);
    return handle;
  }

  /** Removes the member of `handle`; false when it was removed already. */
  delete(handle: number): boolean {
    return this.members.delete(handle);
  }

  clear(): void {
    this.members.clear();
  }

  /** The members with their handles, in the order they were added. */
  entries(): IterableIterator<[number, T]> {
    return this.members.entries();
  }

  values(): IterableIterator<T> {
    return this.members.values();
  }

  [Symbol.iterator](): IterableIterator<T> {
    return this.members.values();
  }
}
