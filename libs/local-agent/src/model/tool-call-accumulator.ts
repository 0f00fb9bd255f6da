import { randomUUID } from 'node:crypto';
import type { JsonObject, ToolCall, ToolCallDelta } from '../host-port';

/*
 * Tool-call fragments of one streamed turn merged into calls (docs/local-agent.md#tool-call-fragments). Keys: the
 * provider id, else its index, else the list position. A fragment without id continues the
 * call at its position; a different real id at the same position (providers that send parallel
 * calls as separate one-item deltas at position 0) starts a new call.
 */

interface Entry {
  id: string;
  hasProviderId: boolean;
  type: string;
  name: string;
  args: string;
  fields: JsonObject | null;
}

export const newCallId = () => `call_${randomUUID().replace(/-/g, '')}`;

export class ToolCallAccumulator {
  private readonly entries: Entry[] = [];
  private readonly byKey = new Map<string, Entry>();

  push(deltas: readonly ToolCallDelta[] | null | undefined): void {
    (deltas ?? []).forEach((d, position) => this.pushOne(d, position));
  }

  private pushOne(d: ToolCallDelta, position: number): void {
    if (!d || typeof d !== 'object') {
      return;
    }
    const id = typeof d.id === 'string' && d.id !== '' ? d.id : null;
    const slot = typeof d.index === 'number' ? `index:${d.index}` : `position:${position}`;
    let entry = id ? this.byKey.get(`id:${id}`) : undefined;
    if (!entry) {
      const atSlot = this.byKey.get(slot);
      if (atSlot && (!id || !atSlot.hasProviderId)) {
        entry = atSlot;
        if (id && !atSlot.hasProviderId) {
          atSlot.id = id; // a late id adopts the call started without one
          atSlot.hasProviderId = true;
        }
      }
    }
    if (!entry) {
      entry = {
        id: id ?? newCallId(),
        hasProviderId: !!id,
        type: d.type || 'function',
        name: '',
        args: '',
        fields: null,
      };
      this.entries.push(entry);
    }
    this.byKey.set(slot, entry);
    if (id) {
      this.byKey.set(`id:${id}`, entry);
    }
    const fn = d.function ?? {};
    if (typeof fn.name === 'string' && fn.name !== '') {
      entry.name = fn.name;
    }
    if (typeof fn.arguments === 'string') {
      entry.args += fn.arguments;
    }
    if (d.provider_specific_fields && typeof d.provider_specific_fields === 'object') {
      entry.fields = { ...(entry.fields ?? {}), ...d.provider_specific_fields };
    }
  }

  get size(): number {
    return this.entries.length;
  }

  result(): ToolCall[] {
    return this.entries.map((e) => ({
      id: e.id,
      type: e.type,
      function: { name: e.name, arguments: e.args },
      ...(e.fields ? { provider_specific_fields: e.fields } : {}),
    }));
  }
}
