import type { ConfigSchemaItem, JsonObject, RunnerCapabilities, RunnerPermissions } from '@runner-host/runner-sdk';

/** Config `mode` values: `echo` is the real behaviour, the others exercise the host's error paths. */
export const MODES = [
  'echo',
  'fail',
  'stall',
  'bad_sequence',
  'unknown_type',
  'bad_payload',
  'crash',
  'ignore_cancel',
  'host_api_bench',
  'steer',
  'long_answer',
  'interaction',
] as const;
export type Mode = (typeof MODES)[number];

/**
 * What the manifest of this plugin's one runner, `default`, declares besides its name; the SDK
 * derives `id` = `plugin:<author>/<plugin>/default` and the rest (libs/runner-sdk, manifestOf).
 * The host validates it strictly.
 */
export function demoManifest(opts: { steering?: boolean } = {}): {
  label: Record<string, string>;
  description: Record<string, string>;
  capabilities: RunnerCapabilities;
  permissions: RunnerPermissions;
  configSchema: ConfigSchemaItem[];
} {
  return {
    label: { en_US: 'Echo (demo)' },
    description: {
      en_US: 'Demo runner: streams the input text back word by word. `mode` selects a test behaviour.',
    },
    // `steering` (DEMO_STEERING=1): follow-ups of a busy conversation are steered into its run by
    // default; mode `steer` pulls them at turn boundaries, other modes never pull (the host then
    // re-dispatches them as runs of their own when the run ends).
    // `interactions`: mode `interaction` asks the user; the agent's delivery policy must allow it too.
    capabilities: {
      streaming: true,
      interrupt: true,
      interactions: true,
      ...(opts.steering ? { steering: true } : {}),
    },
    // Upper bounds of what its runs may pull from the host; each agent's policy narrows them further.
    permissions: {
      history: ['page', 'search'],
      events: ['get', 'page'],
      storage: ['plugin'],
      interactions: ['request'],
    },
    configSchema: [
      {
        type: 'select',
        name: 'mode',
        required: false,
        default: 'echo',
        options: MODES.map((mode) => ({ name: mode, label: { en_US: mode } })),
      },
      { type: 'integer', name: 'chunk_delay_ms', required: false, default: 0 },
      { type: 'boolean', name: 'cumulative', required: false, default: false },
      { type: 'integer', name: 'timeout', required: false, default: 300 },
      { type: 'integer', name: 'steer_wait_ms', required: false, default: 1000 },
      { type: 'string', name: 'steer_mode', required: false, default: 'all' },
      { type: 'integer', name: 'deltas', required: false, default: 1000 },
      { type: 'integer', name: 'delta_chars', required: false, default: 8192 },
      { type: 'integer', name: 'paragraph_every', required: false, default: 0 },
      { type: 'integer', name: 'interaction_expires_in', required: false },
      { type: 'string', name: 'interaction_id', required: false, default: 'profile' },
    ],
  };
}

/** `DEMO_EXTRA_MANIFESTS`: a JSON array of objects sent as they are (tests use it for bad manifests). */
export function parseExtraManifests(raw: string | undefined): JsonObject[] {
  if (raw === undefined || raw.trim() === '') {
    return [];
  }
  const parsed: unknown = JSON.parse(raw);
  if (!Array.isArray(parsed) || !parsed.every((m) => typeof m === 'object' && m !== null && !Array.isArray(m))) {
    throw new Error('DEMO_EXTRA_MANIFESTS must be a JSON array of objects');
  }
  return parsed as JsonObject[];
}
