import { setImmediate as nextTurn } from 'node:timers/promises';
import { Injectable, Logger, type OnApplicationBootstrap, type OnModuleDestroy } from '@nestjs/common';
import { KnowledgeRepository, type KbDocumentEntity, type NewKbChunk } from '@libs/persistence';
import { DomainError } from '@libs/protocol';

/**
 * How a document is written and removed in pieces, so no single task holds the event loop
 * (docs/models-tools-knowledge.md#uploads-in-batches). Constants, not settings.
 */
export const KB_BATCH = {
  /**
   * Chunk rows per write transaction (SQLite with its FTS5 index: ~45 µs a row of 100 characters
   * on an idle core, so a batch is ~6 ms)…
   */
  rows: 128,
  /** …and at most about this many characters of chunk content (a batch closes at the chunk that reaches it). */
  chars: 32 * 1024,
  /** An upload no batch touched for this long is another process's that died (PostgreSQL). */
  abandonAfterMs: 60_000,
  /** How often abandoned uploads are looked for and deleted documents' chunks removed. */
  sweepEveryMs: 60_000,
} as const;

/**
 * Writes documents in batches and removes deleted ones in batches. A document is `writing` (not
 * listed, counted or searched) until its last batch is written, then `ready` in one short update;
 * a failed upload is given up (`deleting`) and its chunks removed, so a search or listing sees a
 * document whole or not at all. A deleted document (or every document of a deleted knowledge base)
 * is `deleting`, invisible at once, while its chunks are removed. Uploads a process left behind —
 * it crashed or was killed mid-upload — are found at boot and every minute (`sweep`).
 */
@Injectable()
export class KnowledgeUploads implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly log = new Logger('Knowledge');
  /** Uploads of this process in progress (never abandoned by its sweep). */
  private readonly live = new Set<string>();
  private sweeping: Promise<void> | null = null;
  private sweepAgain = false;
  private timer: NodeJS.Timeout | undefined;
  /** Shutting down: removals stop between batches (what is left is `deleting`: the next boot's sweep). */
  private stopping = false;

  constructor(private readonly repo: KnowledgeRepository) {}

  onApplicationBootstrap(): void {
    this.kick();
    this.timer = setInterval(() => this.kick(), KB_BATCH.sweepEveryMs);
    this.timer.unref();
  }

  async onModuleDestroy(): Promise<void> {
    this.stopping = true;
    clearInterval(this.timer);
    await this.sweeping;
  }

  /**
   * Writes `doc` with `chunks` (taken from the iterator one batch at a time: chunking happens
   * batch by batch too) and makes it visible; answers its chunk count. Throws `not_found` when
   * the knowledge base does not exist or was deleted meanwhile (nothing of the upload stays).
   */
  async write(doc: KbDocumentEntity, chunks: Iterator<NewKbChunk>): Promise<number> {
    this.live.add(doc.document_id);
    try {
      if (!(await this.repo.beginDocument(doc))) {
        throw this.kbGone(doc.kb_id);
      }
      let count = 0;
      try {
        for (let batch = nextBatch(chunks); batch.length > 0; batch = nextBatch(chunks)) {
          await nextTurn();
          if (!(await this.repo.appendChunks(doc, batch))) {
            throw await this.stopped(doc.kb_id);
          }
          count += batch.length;
        }
        await nextTurn();
        if (!(await this.repo.completeDocument(doc.document_id, count))) {
          throw await this.stopped(doc.kb_id);
        }
      } catch (e) {
        await this.repo.abandonDocument(doc.document_id).catch((err: unknown) => {
          // The sweep gives it up later (at the latest after a restart).
          this.log.warn(`giving up upload ${doc.document_id} failed: ${String(err)}`);
        });
        this.kick();
        throw e;
      }
      return count;
    } finally {
      this.live.delete(doc.document_id);
    }
  }

  /** Removes a `deleting` document's chunks, batch by batch, then its row. */
  async purge(documentId: string): Promise<void> {
    while (!this.stopping && !(await this.repo.purgeDocument(documentId, KB_BATCH.rows, KB_BATCH.chars))) {
      await nextTurn();
    }
  }

  /**
   * Gives up uploads a dead process left and removes every `deleting` document. One sweep at a
   * time; a sweep asked for meanwhile runs after it. Resolves when the sweep (and any it started)
   * is done.
   */
  async sweep(): Promise<void> {
    this.kick();
    while (this.sweeping !== null) {
      await this.sweeping;
    }
  }

  private kick(): void {
    if (this.sweeping !== null) {
      this.sweepAgain = true;
      return;
    }
    this.sweeping = this.sweepOnce()
      .catch((e: unknown) => this.log.error(`knowledge sweep failed: ${e instanceof Error ? e.message : String(e)}`))
      .finally(() => {
        this.sweeping = null;
        if (this.sweepAgain) {
          this.sweepAgain = false;
          this.kick();
        }
      });
  }

  private async sweepOnce(): Promise<void> {
    const abandoned = await this.repo.abandonStaleUploads(this.live, KB_BATCH.abandonAfterMs);
    if (abandoned > 0) {
      this.log.warn(`gave up ${abandoned} knowledge upload(s) a stopped process left unfinished`);
    }
    // At shutdown `purge` stops between batches and leaves its document `deleting`: the loop
    // stops with it (the same ids would come back forever), and the next boot's sweep goes on.
    for (
      let ids = await this.repo.deletingDocuments(100);
      ids.length > 0 && !this.stopping;
      ids = await this.repo.deletingDocuments(100)
    ) {
      for (const id of ids) {
        await this.purge(id);
      }
    }
  }

  private kbGone(kbId: string): DomainError {
    return new DomainError('not_found', `knowledge base ${kbId} not found`, { kb_id: kbId });
  }

  /** Why an upload could not go on: its knowledge base was deleted, or it was given up. */
  private async stopped(kbId: string): Promise<DomainError> {
    if ((await this.repo.getKnowledgeBase(kbId)) === null) {
      return this.kbGone(kbId);
    }
    return new DomainError('unavailable', 'the upload was given up before it was complete; nothing was stored, retry', {
      kb_id: kbId,
    });
  }
}

/** The next batch: up to KB_BATCH.rows chunks, closed at the chunk that reaches KB_BATCH.chars. */
export function nextBatch(chunks: Iterator<NewKbChunk>): NewKbChunk[] {
  const batch: NewKbChunk[] = [];
  let chars = 0;
  while (batch.length < KB_BATCH.rows && chars < KB_BATCH.chars) {
    const next = chunks.next();
    if (next.done === true) {
      break;
    }
    batch.push(next.value);
    chars += next.value.content.length;
  }
  return batch;
}
