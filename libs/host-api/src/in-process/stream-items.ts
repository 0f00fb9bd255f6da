import type { ModelStreamItem as PortStreamItem, ToolCallDelta, Usage } from '@libs/local-agent';
import type { ModelStreamItem } from '@libs/resources';

const text = (v: unknown): string | null => (typeof v === 'string' && v !== '' ? v : null);

/**
 * A host model-stream item (a Protocol v1 MessageChunk: `content` is the new text, the final
 * chunk carries the complete tool calls and `provider_specific_fields.finish_reason`; or the
 * trailing usage) → the local agent's stream item. An empty usage object means the provider
 * reported none: absent, never zero.
 */
export function fromStreamItem(item: ModelStreamItem): PortStreamItem {
  if (!item.chunk) {
    const usage = item.usage && Object.keys(item.usage).length > 0 ? (item.usage as Usage) : null;
    return { usage };
  }
  const chunk = item.chunk;
  const { finish_reason, ...providerFields } = (chunk.provider_specific_fields ?? {}) as Record<string, unknown>;
  const calls = Array.isArray(chunk.tool_calls) ? (chunk.tool_calls as ToolCallDelta[]) : [];
  const out: PortStreamItem = {
    delta: text(chunk.content),
    reasoning_delta: text(chunk.reasoning_content),
  };
  if (calls.length > 0) {
    out.tool_calls = calls.map((call, index) => ({ ...call, index }));
  }
  if (chunk.is_final === true) {
    out.is_final = true;
    out.finish_reason = typeof finish_reason === 'string' ? finish_reason : null;
    if (Object.keys(providerFields).length > 0) {
      out.provider_specific_fields = providerFields;
    }
  }
  return out;
}
