import { fromStruct, fromStructOrNull, type WireStruct } from './json';
import type { RunContext } from './types';
import { decodedAs } from './wire';

/*
 * The run context as proto-loader decodes it -> plain JSON (types.ts). Only the
 * google.protobuf.Struct fields need converting; everything else already has its JSON shape.
 */

type Wire = Record<string, unknown> | null | undefined;

function obj(value: unknown): Record<string, unknown> | null {
  return value && typeof value === 'object' ? (value as Record<string, unknown>) : null;
}

/** Converts the named Struct fields of one message (in place on a copy); null stays null. */
function withStructs(message: Wire, fields: string[]): Record<string, unknown> | null {
  const m = obj(message);
  if (!m) {
    return null;
  }
  const out: Record<string, unknown> = { ...m };
  for (const f of fields) {
    out[f] = fromStructOrNull(m[f] as WireStruct | null | undefined);
  }
  return out;
}

export function decodeContext(wire: Record<string, unknown>): RunContext {
  const resources = obj(wire.resources);
  const state = obj(wire.state);
  return decodedAs<RunContext>({
    ...wire,
    event: withStructs(obj(wire.event), ['data']),
    actor: withStructs(obj(wire.actor), ['metadata']),
    subject: withStructs(obj(wire.subject), ['data']),
    input: withStructs(obj(wire.input), ['interaction']),
    delivery: withStructs(obj(wire.delivery), ['reply_target', 'platform_capabilities']),
    resources: resources && {
      ...resources,
      tools: ((resources.tools as Wire[] | undefined) ?? []).map((t) =>
        withStructs(t, ['parameters', 'annotations', 'output_schema']),
      ),
      platform_capabilities: fromStructOrNull(resources.platform_capabilities as WireStruct | null),
    },
    state: state && withStructs(state, ['conversation', 'actor', 'subject', 'runner']),
    runtime: withStructs(obj(wire.runtime), ['metadata']),
    config: fromStruct(wire.config as WireStruct | null),
    metadata: fromStruct(wire.metadata as WireStruct | null),
  });
}
