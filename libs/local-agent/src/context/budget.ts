import type { JsonObject } from '../host-port';
import type { AgentConfig } from '../config';

/** The token budget of one run's context (docs/local-agent.md#the-budget). */
export interface ContextBudget {
  enabled: boolean;
  window_tokens: number;
  reserve_tokens: number;
  input_tokens: number;
  keep_recent_tokens: number;
  summary_tokens: number;
}

const WINDOW_KEYS = [
  'model_context_window_tokens',
  'context_window_tokens',
  'model_context_tokens',
  'contextWindowTokens',
  'context_window',
];
const MODEL_WINDOW_KEYS = ['context_window_tokens', 'contextWindowTokens', 'context_window'];
const OUTPUT_KEYS = ['model_max_output_tokens', 'max_output_tokens', 'model_output_tokens', 'maxOutputTokens'];
const MODEL_OUTPUT_KEYS = ['max_output_tokens', 'maxOutputTokens', 'output_tokens'];

const positiveInt = (v: unknown): number | null => (typeof v === 'number' && Number.isInteger(v) && v > 0 ? v : null);

function firstPositive(meta: JsonObject, keys: string[], modelKeys: string[]): number | null {
  for (const k of keys) {
    const v = positiveInt(meta[k]);
    if (v !== null) {
      return v;
    }
  }
  const model = meta.model;
  if (model && typeof model === 'object' && !Array.isArray(model)) {
    for (const k of modelKeys) {
      const v = positiveInt((model as JsonObject)[k]);
      if (v !== null) {
        return v;
      }
    }
  }
  return null;
}

export interface BudgetFields {
  window_tokens: number;
  reserve_tokens: number;
  keep_recent_tokens: number;
  summary_tokens: number;
}

/** The budget formula: window capped by the host's, reserve clamped, summary capped by max output. */
export function computeBudget(
  fields: BudgetFields,
  hostWindow: number | null,
  hostMaxOutput: number | null,
): ContextBudget {
  const window = hostWindow ? Math.min(hostWindow, fields.window_tokens) : fields.window_tokens;
  const reserve =
    window <= 0 || fields.reserve_tokens <= 0
      ? 0
      : Math.min(fields.reserve_tokens, Math.max(1, Math.floor(window / 4)));
  let summary = fields.summary_tokens;
  if (hostMaxOutput && hostMaxOutput > 0) {
    summary = Math.min(summary, hostMaxOutput, Math.max(1, Math.floor((reserve * 4) / 5)));
  }
  const enabled = window > 0;
  return {
    enabled,
    window_tokens: window,
    reserve_tokens: reserve,
    input_tokens: enabled ? Math.max(window - reserve, 1) : 0,
    keep_recent_tokens: fields.keep_recent_tokens,
    summary_tokens: summary,
  };
}

/** The run's budget from its config and the host's runtime metadata (window and max output). */
export function budgetFromContext(config: AgentConfig, metadata: unknown): ContextBudget {
  const meta = metadata && typeof metadata === 'object' && !Array.isArray(metadata) ? (metadata as JsonObject) : {};
  return computeBudget(
    {
      window_tokens: config['context-window-tokens'],
      reserve_tokens: config['context-reserve-tokens'],
      keep_recent_tokens: config['context-keep-recent-tokens'],
      summary_tokens: config['context-summary-tokens'],
    },
    firstPositive(meta, WINDOW_KEYS, MODEL_WINDOW_KEYS),
    firstPositive(meta, OUTPUT_KEYS, MODEL_OUTPUT_KEYS),
  );
}

/**
 * The budget of the single aggressive overflow retry: 3/4 of the input, no reserve
 * (docs/local-agent.md#overflow-retry).
 */
export function overflowRetryBudget(b: ContextBudget): ContextBudget {
  const window = Math.max(1, Math.floor((b.input_tokens * 3) / 4));
  return {
    enabled: true,
    window_tokens: window,
    reserve_tokens: 0,
    input_tokens: window,
    keep_recent_tokens: Math.min(b.keep_recent_tokens, Math.max(1, Math.floor(window / 2))),
    summary_tokens: Math.min(b.summary_tokens, Math.max(0, Math.floor(window / 4))),
  };
}
