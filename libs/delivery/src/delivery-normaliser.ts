/**
 * The delivery normaliser (docs/delivery.md#normalisation-rules): a pure function from a run's
 * results to delivery ops. Given the run's plan, its state so far, one input and the time, it
 * returns the new state and the ops that input implies; nothing else is read or changed.
 * `RunDelivery` owns the state of a live run.
 *
 * Rules: text comes from `message.delta` (`all_content` when present — cumulative — else the
 * chunk's `content` appended), `message.completed`, `run.completed.message`. In `edit` mode the
 * first visible text is sent, then edits follow at most once per `edit_interval_ms` and only
 * after `min_edit_chars` new characters (a timed `tick` sends what is pending), and the answer
 * ends with a `message.final` whose text is the completed message's. In `parts` mode complete
 * paragraphs are sent as the answer grows; in `final` mode only the completed message. Any text
 * over `max_message_size` is split (split.ts). Non-text content of a completed message becomes
 * attachments. A failed, cancelled or timed-out run ends what was shown (`incomplete`) and gets
 * its notice, never the runner's error text. No op carries a whitespace-only text: whitespace that
 * would be a message of its own leads the next one or stays with the previous one
 * (docs/delivery.md#normalisation-rules); a whitespace-only answer sends nothing.
 *
 * Cost: a delta costs the normaliser O(its own size), however long the answer already is
 * (docs/delivery.md, "Long answers"): the answer's text is only ever appended to (a rope, never
 * flattened per delta); what is not yet sent or shown (`pending`) is kept with its size, whether
 * it has visible text, and a paragraph scan (split.ts `scanParagraphs`) that examines each
 * character once, starting in the code-fence state the sent text left (`fence`, advanced over each
 * part sent: a fence is the answer's, a message boundary does not close it). Whole texts are
 * read only where an op carries them. A message showing more than LARGE_EDIT (no platform's
 * message can) is not edited again until the answer ends, so that the ops of one answer carry
 * O(its size) text in all.
 */
import type { RunStatus } from '@libs/protocol';
import { deliveryId, idempotencyKey, type DeliveryOp, type DeliveryOpType } from './ops';
import type { DeliveryPlan, NoticeKind } from './plan';
import { attachmentsOf, textOf } from './message-content';
import { noticeText } from './notices';
import {
  EMPTY_GROWING_SPLIT,
  EMPTY_SCAN,
  NO_FENCE,
  advanceFence,
  finishSplit,
  growSplit,
  measure,
  scanFrom,
  scanParagraphs,
  scannedParagraphs,
  splitSpans,
  visible,
  type FenceContext,
  type GrowingSplit,
  type ParagraphScan,
  type Span,
} from './split';

/** The part of a stored result the normaliser reads. */
export interface ResultLike {
  run_id: string;
  sequence: number;
  type: string;
  data: Record<string, unknown>;
}

export type NormaliserInput =
  | { kind: 'result'; result: ResultLike }
  | { kind: 'end'; result: ResultLike; status: RunStatus }
  | { kind: 'tick' }
  /** An op decided outside the normaliser (an interaction, docs/interactions.md#delivery), in the run's order. */
  | { kind: 'op'; op: DeliveryOpType; payload: Record<string, unknown>; result_sequence: number | null };

/** The answer being streamed. */
export interface OpenMessage {
  /** The answer's text so far. */
  readonly text: string;
  /** edit: where the current platform message starts in `text`. */
  readonly base: number;
  /** edit: delivery id of the current platform message (null before the first send). */
  readonly current: string | null;
  readonly current_part: number;
  /** edit: what the current platform message shows. */
  readonly shown: string;
  readonly last_edit_at: number;
  /** parts: how much of `text` was sent. */
  readonly sent: number;
  /** `text` from `sent` (parts) or `base` (edit, final): what is not yet sent, or the current message's text. */
  readonly pending: string;
  /** measure(pending) in the plan's unit (an upper bound: exact after each reset). */
  readonly pending_size: number;
  readonly pending_visible: boolean;
  /** Where `pending`'s first visible character is (-1: none): text before it is never sent alone. */
  readonly pending_lead: number;
  /** edit: `pending` starts with `shown` (the text only grew since it was shown). */
  readonly extends_shown: boolean;
  /** parts: the paragraph scan of `pending`. */
  readonly scan: ParagraphScan;
  /**
   * parts, edit: the code-fence state where `pending` starts. A fence belongs to the answer: a part sent
   * inside one leaves it open for the rest (docs/delivery.md#normalisation-rules).
   */
  readonly fence: FenceContext;
  /** final with a size limit: `text` split as it grows, so that its end splits only the last parts. */
  readonly growing: GrowingSplit;
  /**
   * edit: the last message an overflow ended (full, only whitespace after it so far), which gets the
   * answer's `message.final` when no visible text follows (no op carries whitespace only).
   */
  readonly ended: { readonly id: string; readonly part: number; readonly text: string } | null;
}

export interface NormaliserState {
  readonly run_id: string;
  /** Sequence of the last op. */
  readonly seq: number;
  /** Platform messages sent so far (the next one's `part`). */
  readonly parts: number;
  readonly open: OpenMessage | null;
  /** The text of the last completed answer (a `run.completed.message` repeating it is not sent again). */
  readonly last_final: string | null;
  readonly ended: boolean;
}

export function initialState(runId: string): NormaliserState {
  return { run_id: runId, seq: 0, parts: 0, open: null, last_final: null, ended: false };
}

const EMPTY_MESSAGE: OpenMessage = {
  text: '',
  base: 0,
  current: null,
  current_part: 0,
  shown: '',
  last_edit_at: 0,
  sent: 0,
  pending: '',
  pending_size: 0,
  pending_visible: false,
  pending_lead: -1,
  extends_shown: true,
  scan: EMPTY_SCAN,
  fence: NO_FENCE,
  growing: EMPTY_GROWING_SPLIT,
  ended: null,
};

/**
 * Once a message shows this many characters it is not edited again until the answer ends (its
 * `message.final` shows everything): without it every delta of a huge answer to an edit surface
 * without a size limit would be an edit op carrying the whole answer (quadratic bytes in the
 * outbox, and in every reader's replay). Platforms' own limits (surfaces.ts) are far below it.
 */
export const LARGE_EDIT = 65_536;

/** Collects ops while one input is normalised. */
class Emitter {
  readonly ops: DeliveryOp[] = [];

  constructor(
    private readonly plan: DeliveryPlan,
    private readonly runId: string,
    public seq: number,
    private readonly resultSequence: number | null,
    private readonly now: number,
  ) {}

  emit(op: DeliveryOpType, payload: Record<string, unknown>, target: string | null = null): string {
    const sequence = ++this.seq;
    const id = deliveryId(this.runId, sequence);
    this.ops.push({
      delivery_id: id,
      run_id: this.runId,
      sequence,
      op,
      idempotency_key: idempotencyKey(this.runId, sequence),
      reply_target: this.plan.reply_target,
      target_delivery_id: target,
      result_sequence: this.resultSequence,
      payload,
      created_at: this.now,
    });
    return id;
  }
}

type Mutable<T> = { -readonly [K in keyof T]: T[K] };

interface Draft {
  plan: DeliveryPlan;
  now: number;
  out: Emitter;
  state: Mutable<NormaliserState>;
}

/** The parts of `text` (never whitespace only: split.ts `splitSpans`), as spans of it. */
function spans(d: Draft, text: string, fence: FenceContext = NO_FENCE): Span[] {
  return splitSpans(text, d.plan.max_message_size, d.plan.size_unit, fence);
}

function split(d: Draft, text: string, fence: FenceContext = NO_FENCE): string[] {
  return spans(d, text, fence).map((s) => text.slice(s.start, s.end));
}

/** Whether the pending text is over the size limit; exact, measured only when the running bound says it may be. */
function pendingOver(d: Draft, m: Mutable<OpenMessage>): boolean {
  const max = d.plan.max_message_size;
  if (max === null || m.pending_size <= max) {
    return false;
  }
  m.pending_size = measure(m.pending, d.plan.size_unit);
  return m.pending_size > max;
}

/** `pending` set anew (after a part was sent or the runner rewrote the text): its facts measured once. */
function resetPending(d: Draft, m: Mutable<OpenMessage>, pending: string): void {
  m.pending = pending;
  m.pending_size = measure(pending, d.plan.size_unit);
  m.pending_lead = pending.search(/\S/);
  m.pending_visible = m.pending_lead !== -1;
  m.extends_shown = pending.startsWith(m.shown);
  m.scan = d.plan.mode === 'parts' ? scanParagraphs(scanFrom(m.fence), pending) : EMPTY_SCAN;
  const limit = growLimit(d.plan);
  m.growing = limit === null ? EMPTY_GROWING_SPLIT : growSplit(EMPTY_GROWING_SPLIT, pending, limit, d.plan.size_unit);
}

/** final mode with a size limit: the answer (`pending` is all of it) is split as it grows; its limit, else null. */
function growLimit(plan: DeliveryPlan): number | null {
  return plan.mode === 'final' ? plan.max_message_size : null;
}

/** `chunk` appended to the answer: O(chunk). */
function appendPending(d: Draft, m: Mutable<OpenMessage>, chunk: string): void {
  const before = m.pending.length;
  m.text += chunk;
  m.pending += chunk;
  // A sum of the chunks' sizes: exact for whole code points, an upper bound for a pair cut in two.
  m.pending_size += measure(chunk, d.plan.size_unit);
  if (!m.pending_visible) {
    const lead = chunk.search(/\S/);
    if (lead !== -1) {
      m.pending_visible = true;
      m.pending_lead = before + lead;
    }
  }
  if (!m.extends_shown && before < m.shown.length) {
    m.extends_shown = m.pending.startsWith(m.shown); // only after a rewrite shortened the text
  }
  if (d.plan.mode === 'parts') {
    m.scan = scanParagraphs(m.scan, chunk);
  }
  const limit = growLimit(d.plan);
  if (limit !== null) {
    m.growing = growSplit(m.growing, chunk, limit, d.plan.size_unit);
  }
}

/** The growth an edit of the current message waits for: none past LARGE_EDIT (the final edit only). */
function editGrowth(plan: DeliveryPlan, shownLength: number): number {
  return shownLength >= LARGE_EDIT ? Infinity : plan.min_edit_chars;
}

/** Sends one new platform message; returns its delivery id. */
function sendNew(d: Draft, text: string, op: 'message.send' | 'message.final', extra = {}): string {
  return d.out.emit(op, { text, part: d.state.parts++, ...extra });
}

/** edit mode: shows the answer's new text — first send, overflow into new messages, coalesced edits. */
function showEdit(d: Draft, m: Mutable<OpenMessage>, force: boolean): void {
  if (pendingOver(d, m)) {
    overflow(d, m);
  }
  if (m.current === null) {
    if (!m.pending_visible) {
      return; // whitespace only: it leads the next message's text
    }
    m.current_part = d.state.parts;
    m.current = sendNew(d, m.pending, 'message.send');
    m.shown = m.pending;
    m.last_edit_at = d.now;
    m.extends_shown = true;
    return;
  }
  if ((m.extends_shown && m.pending.length === m.shown.length) || !m.pending_visible) {
    return; // nothing new, or a rewrite to whitespace only (never shown)
  }
  const due = d.now - m.last_edit_at >= d.plan.edit_interval_ms;
  const growth = m.pending.length - m.shown.length;
  const large = m.shown.length >= LARGE_EDIT;
  const enough = (force && !large) || growth >= editGrowth(d.plan, m.shown.length) || !m.extends_shown;
  if (due && enough) {
    const text = m.pending;
    d.out.emit('message.edit', { text, part: m.current_part }, m.current);
    m.shown = text;
    m.extends_shown = true;
    m.last_edit_at = d.now;
  }
}

/**
 * edit mode, the text of the current message (or of the next one) is over the limit: its parts are
 * shown — the first as an edit of the current message, the others as new messages — but the last,
 * which stays pending as the next message; when only whitespace follows the last part, the last part
 * is ended too and the whitespace waits for visible text to lead (or is dropped at the end).
 */
function overflow(d: Draft, m: Mutable<OpenMessage>): void {
  const cut = spans(d, m.pending, m.fence);
  if (cut.length === 0) {
    return; // whitespace only: nothing to show
  }
  const last = cut[cut.length - 1];
  const blankTail = last.end < m.pending.length;
  let ending = blankTail ? cut : cut.slice(0, -1);
  if (m.current !== null && ending.length === 0) {
    ending = cut; // the current message (rewritten) ends with its one part
  }
  const kept = ending.length === cut.length ? last.end : last.start;
  for (const s of ending) {
    const text = m.pending.slice(s.start, s.end);
    if (m.current !== null) {
      // The message ends as its first part; no edit when it shows that already (an identical edit
      // is refused by the platform: Telegram's "message is not modified").
      if (text !== m.shown) {
        d.out.emit('message.edit', { text, part: m.current_part }, m.current);
      }
      m.ended = { id: m.current, part: m.current_part, text };
      m.current = null;
    } else {
      const part = d.state.parts;
      m.ended = { id: sendNew(d, text, 'message.send'), part, text };
    }
  }
  m.base += kept;
  m.shown = '';
  m.fence = advanceFence(m.fence, m.pending.slice(0, kept));
  resetPending(d, m, m.pending.slice(kept));
}

/** parts mode: sends the complete paragraphs of the answer not yet sent (and whatever overflows). */
function showParts(d: Draft, m: Mutable<OpenMessage>): void {
  let ready = scannedParagraphs(m.scan);
  if (ready <= m.pending_lead || !m.pending_visible) {
    ready = 0; // whitespace only before the paragraph: it leads the next part
  }
  if (pendingOver(d, m)) {
    const cut = spans(d, m.pending, m.fence);
    if (cut.length > 1) {
      ready = Math.max(ready, cut[cut.length - 1].start);
    }
  }
  if (ready === 0) {
    return;
  }
  const sending = m.pending.slice(0, ready);
  const cut = spans(d, sending, m.fence);
  for (const s of cut) {
    sendNew(d, sending.slice(s.start, s.end), 'message.send');
  }
  // Whitespace after the last part sent that it had no room for leads the next part.
  const sent = cut[cut.length - 1].end;
  m.sent += sent;
  // The rest starts where the sent text left the fence (O(sent text): each character once).
  m.fence = advanceFence(m.fence, sending.slice(0, sent));
  resetPending(d, m, m.pending.slice(sent));
}

/**
 * The answer's text changed (a delta): `appended` to it, or (null) rewritten by the runner's
 * `all_content` to `text`.
 */
function onText(d: Draft, text: string, appended: string | null): void {
  const m: Mutable<OpenMessage> = { ...(d.state.open ?? EMPTY_MESSAGE) };
  d.state.open = m;
  if (appended !== null) {
    appendPending(d, m, appended);
  } else {
    m.text = text;
    const from = Math.min(d.plan.mode === 'parts' ? m.sent : m.base, text.length);
    if (d.plan.mode !== 'final') {
      // Rewritten: the fence state at `sent` (`base`) of the new text (a rewrite carries the whole text).
      m.fence = advanceFence(NO_FENCE, text.slice(0, from));
    }
    resetPending(d, m, text.slice(from));
  }
  if (d.plan.mode === 'edit') {
    showEdit(d, m, false);
  } else if (d.plan.mode === 'parts') {
    showParts(d, m);
  }
}

/**
 * Ends the open answer with its final text (the completed message, or what streamed): every
 * remaining part, the last as `message.final` — an edit of the current message when there is one.
 */
function finishAnswer(d: Draft, finalText: string, incomplete: boolean): void {
  const m = d.state.open ?? EMPTY_MESSAGE;
  const extra = incomplete ? { incomplete: true } : {};
  d.state.open = null;
  if (d.plan.mode === 'final' && incomplete) {
    return; // nothing was shown: a partial answer is not sent
  }
  const from = d.plan.mode === 'edit' ? m.base : d.plan.mode === 'parts' ? m.sent : 0;
  // The final text normally extends what was sent; if the runner changed it, what is left of it.
  const remaining = finalText.slice(Math.min(from, finalText.length));
  // final mode: the streamed text was split as it grew; only its last parts are cut now.
  const limit = growLimit(d.plan);
  const grown = limit !== null && finalText === m.text ? finishSplit(m.growing, limit, d.plan.size_unit) : null;
  // parts, edit: the rest starts in the fence state the sent parts left (that of the final text's start, if it changed).
  const fence =
    d.plan.mode === 'final'
      ? NO_FENCE
      : finalText === m.text
        ? m.fence
        : advanceFence(NO_FENCE, finalText.slice(0, from));
  const parts = visible(remaining) ? (grown ?? split(d, remaining, fence)) : [];
  if (d.plan.mode === 'edit' && m.current !== null) {
    const [first, ...rest] = parts.length > 0 ? parts : [m.shown];
    if (rest.length === 0) {
      d.out.emit('message.final', { text: first, part: m.current_part, ...extra }, m.current);
      return;
    }
    if (first !== m.shown) {
      d.out.emit('message.edit', { text: first, part: m.current_part }, m.current); // never an identical edit
    }
    rest.slice(0, -1).forEach((p) => sendNew(d, p, 'message.send'));
    sendNew(d, rest[rest.length - 1], 'message.final', extra);
    return;
  }
  parts.slice(0, -1).forEach((p) => sendNew(d, p, 'message.send'));
  if (parts.length > 0) {
    sendNew(d, parts[parts.length - 1], 'message.final', extra);
  } else if (d.plan.mode === 'edit' && m.ended !== null) {
    // Only whitespace after the message an overflow ended: that message is the answer's last.
    d.out.emit('message.final', { text: m.ended.text, part: m.ended.part, ...extra }, m.ended.id);
  }
}

/** A completed message: its text ends the answer, its images and files follow it. */
function onCompleted(d: Draft, message: Record<string, unknown> | undefined, repeatable: boolean): void {
  const content = message?.content;
  const text = textOf(content);
  const open = d.state.open;
  if (!repeatable && open === null && text === d.state.last_final) {
    return; // run.completed repeating the message already delivered
  }
  if (visible(text)) {
    finishAnswer(d, text, false);
    d.state.last_final = text;
  } else if (open !== null && visible(open.text)) {
    // A message without text (tool calls only) ends what streamed before it as it stands.
    finishAnswer(d, open.text, false);
    d.state.last_final = open.text;
  }
  for (const a of attachmentsOf(content)) {
    d.out.emit('attachment.send', { attachment: a });
  }
}

function noticeKind(status: RunStatus, code: unknown): NoticeKind {
  if (status === 'cancelled' || code === 'cancelled') {
    return 'cancelled';
  }
  return status === 'timeout' ? 'timeout' : 'failed';
}

function onEnd(d: Draft, result: ResultLike, status: RunStatus): void {
  d.state.ended = true;
  if (status === 'completed') {
    const message = result.data.message as Record<string, unknown> | undefined;
    if (message) {
      onCompleted(d, message, false);
    }
    const open = d.state.open;
    if (open !== null && visible(open.text)) {
      finishAnswer(d, open.text, false);
    }
    d.state.open = null;
    return;
  }
  const open = d.state.open;
  if (open !== null && visible(open.text)) {
    finishAnswer(d, open.text, true);
  }
  d.state.open = null;
  const kind = noticeKind(status, result.data.code);
  const setting = d.plan.notices[kind];
  if (setting !== false) {
    const retryable = kind === 'timeout' || (kind === 'failed' && result.data.retryable === true);
    const text = typeof setting === 'string' ? setting : noticeText(kind, retryable);
    d.out.emit('notice.send', { kind, text, retryable });
  }
}

function onResult(d: Draft, r: ResultLike): void {
  switch (r.type) {
    case 'message.delta': {
      const chunk = (r.data.chunk ?? {}) as Record<string, unknown>;
      const all = chunk.all_content;
      const before = d.state.open?.text ?? '';
      // The new text, and what was appended to the old one (null: the runner rewrote it). Comparing
      // `all_content` with the old text costs the size of this result, which carries it.
      let appended: string | null;
      let text: string;
      if (typeof all === 'string') {
        appended = all.length >= before.length && all.startsWith(before) ? all.slice(before.length) : null;
        text = all;
      } else {
        appended = textOf(chunk.content);
        text = before + appended;
      }
      if (chunk.is_final === true) {
        onCompleted(d, { content: text }, true);
      } else if (appended === null ? text !== before : appended !== '') {
        onText(d, text, appended);
      }
      return;
    }
    case 'message.completed':
      onCompleted(d, r.data.message as Record<string, unknown> | undefined, true);
      return;
    default:
      return; // tool calls, state, actions, unknown types: nothing to deliver
  }
}

/** One step of the normaliser: the state after `input` and the ops it implies. */
export function normalise(
  plan: DeliveryPlan,
  state: NormaliserState,
  input: NormaliserInput,
  now: number,
): { state: NormaliserState; ops: DeliveryOp[] } {
  if (state.ended) {
    return { state, ops: [] };
  }
  const resultSequence =
    input.kind === 'tick' ? null : input.kind === 'op' ? input.result_sequence : input.result.sequence;
  const out = new Emitter(plan, state.run_id, state.seq, resultSequence, now);
  const d: Draft = { plan, now, out, state: { ...state } };
  switch (input.kind) {
    case 'result':
      onResult(d, input.result);
      break;
    case 'end':
      onEnd(d, input.result, input.status);
      break;
    case 'op':
      out.emit(input.op, input.payload);
      break;
    case 'tick':
      if (plan.mode === 'edit' && d.state.open !== null) {
        const m = { ...d.state.open };
        d.state.open = m;
        showEdit(d, m, true);
      }
      break;
  }
  d.state.seq = out.seq;
  return { state: d.state, ops: out.ops };
}

/** When a `tick` would send a pending edit (edit mode, text not yet shown); null when nothing is pending. */
export function nextDueAt(plan: DeliveryPlan, state: NormaliserState): number | null {
  const m = state.open;
  if (plan.mode !== 'edit' || state.ended || m === null || m.current === null) {
    return null;
  }
  if (m.extends_shown) {
    const growth = m.pending.length - m.shown.length;
    // Nothing new, or a large message (LARGE_EDIT) waiting for its final edit: no timed edit.
    if (growth === 0 || m.shown.length >= LARGE_EDIT) {
      return null;
    }
  }
  return m.last_edit_at + plan.edit_interval_ms;
}
