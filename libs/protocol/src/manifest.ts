import { z } from 'zod';
import { describeIssues } from './zod-issues';

const i18n = z.record(z.string(), z.string());
const opsOf = <T extends readonly [string, ...string[]]>(values: T) => z.array(z.enum(values)).optional();

export const CAPABILITY_NAMES = [
  'streaming',
  'tool_calling',
  'knowledge_retrieval',
  'multimodal_input',
  'skill_authoring',
  'skill_injection',
  'event_context',
  'platform_api',
  'interrupt',
  'stateful_session',
  'self_managed_context',
  'steering',
  'interactions',
] as const;

const capabilities = z.strictObject(
  Object.fromEntries(CAPABILITY_NAMES.map((name) => [name, z.boolean().optional()])) as Record<
    (typeof CAPABILITY_NAMES)[number],
    z.ZodOptional<z.ZodBoolean>
  >,
);

const permissions = z.strictObject({
  models: opsOf(['invoke', 'stream', 'rerank', 'count_tokens']),
  tools: opsOf(['detail', 'call']),
  knowledge_bases: opsOf(['list', 'retrieve']),
  history: opsOf(['page', 'search']),
  events: opsOf(['get', 'page']),
  artifacts: opsOf(['metadata', 'read']),
  storage: opsOf(['plugin', 'workspace', 'binding']),
  interactions: opsOf(['request']),
  platform_api: z.array(z.string().min(1)).optional(),
});

/** DynamicFormItemSchema: extra keys allowed, as in the protocol. */
export const configSchemaItem = z.looseObject({
  type: z.string().min(1),
  name: z.string().min(1),
  label: i18n.optional(),
  description: i18n.nullable().optional(),
  required: z.boolean().optional(),
  default: z.unknown().optional(),
  options: z.array(z.record(z.string(), z.unknown())).nullable().optional(),
});
export type ConfigSchemaItem = z.infer<typeof configSchemaItem>;

/** Runner Protocol v1 manifest, strict: unknown keys anywhere but open maps are rejected. */
export const runnerManifestSchema = z.strictObject({
  id: z.string().min(1),
  name: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/, 'must be 1-64 letters, digits, ".", "_" or "-"'),
  label: i18n.refine((v) => Object.keys(v).length > 0, 'must have at least one locale'),
  description: i18n.nullable().optional(),
  protocol_version: z.literal('1'),
  capabilities: capabilities.default({}),
  permissions: permissions.default({}),
  context: z.record(z.string(), z.unknown()).optional(),
  config_schema: z.array(configSchemaItem).default([]),
  metadata: z.record(z.string(), z.unknown()).default({}),
});
export type RunnerManifest = z.infer<typeof runnerManifestSchema>;

export type ManifestParse = { ok: true; manifest: RunnerManifest } | { ok: false; reason: string };

/** Validates one manifest; `expectedId` is the id the host derives from the plugin identity. */
export function parseManifest(raw: unknown, expectedIdFor: (name: string) => string): ManifestParse {
  const parsed = runnerManifestSchema.safeParse(raw);
  if (!parsed.success) {
    return { ok: false, reason: describeIssues(parsed.error, 'manifest') };
  }
  const expected = expectedIdFor(parsed.data.name);
  if (parsed.data.id !== expected) {
    return { ok: false, reason: `manifest.id: must be "${expected}" (derived from the plugin identity and name)` };
  }
  return { ok: true, manifest: parsed.data };
}
