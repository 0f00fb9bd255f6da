import { z } from 'zod';
import { ENV_NAME_PATTERN, ENV_NAME_RULE, type SecretEnvPolicy } from '@libs/config';
import { DomainError, zodRefusal } from '@libs/protocol';
import { checkEnvReference } from '../env-reference';

/**
 * Tool source configurations, one schema per kind. Secrets are never stored: environment
 * variables of the stdio child and HTTP header values are references `{env, prefix?}` to host
 * environment variables, resolved only when a connection or request is made.
 */

/** The kinds an admin registers; built-ins are switched on and off, not registered. */
export const SOURCE_KINDS = ['mcp_stdio', 'mcp_http', 'http'] as const;
export type SourceKind = (typeof SOURCE_KINDS)[number];
/** The `source` each kind's tools carry in the catalogue and in the frozen snapshot. */
export const SOURCE_OF: Record<SourceKind, string> = { mcp_stdio: 'mcp', mcp_http: 'mcp', http: 'http' };
export const SOURCE_ID_PATTERN = /^[a-z0-9][a-z0-9_-]{0,63}$/;
/** Source ids that would read like something else. */
export const RESERVED_SOURCE_IDS = new Set(['builtin', 'builtins', 'native', 'skill', 'plugin', 'mcp', 'http']);

const HEADER_NAME = /^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,128}$/;
/** Tool names an HTTP source may define (MCP tool names are taken as their server lists them). */
const TOOL_NAME = /^[A-Za-z0-9_.-]{1,128}$/;

const isHttpUrl = (s: string): boolean => {
  try {
    const u = new URL(s);
    return u.protocol === 'http:' || u.protocol === 'https:';
  } catch {
    return false;
  }
};

const envName = z.string().regex(ENV_NAME_PATTERN, ENV_NAME_RULE);
export const envRef = z.strictObject({ env: envName, prefix: z.string().max(200).optional() });
export type EnvRef = z.infer<typeof envRef>;
const headers = z.record(z.string().regex(HEADER_NAME, 'must be an HTTP header name'), envRef).default({});
const httpUrl = z.string().max(2000).refine(isHttpUrl, 'must be an http:// or https:// URL');
const timeoutMs = z.number().int().min(100).max(3_600_000).optional();

export const mcpStdioConfig = z.strictObject({
  command: z.string().min(1).max(1000),
  args: z.array(z.string().max(4000)).max(100).default([]),
  /** Child environment: NAME → reference (PATH, HOME and a few others are inherited as the SDK does). */
  env: z.record(envName, envRef).default({}),
  cwd: z.string().min(1).max(1000).optional(),
  timeout_ms: timeoutMs,
});

export const mcpHttpConfig = z.strictObject({ url: httpUrl, headers, timeout_ms: timeoutMs });

const jsonSchemaObject = z
  .record(z.string(), z.unknown())
  .refine((s) => s.type === 'object', 'must be a JSON schema with type "object"');

export const httpToolSpec = z.strictObject({
  name: z.string().regex(TOOL_NAME, 'must be 1-128 letters, digits, "_", "." or "-"'),
  description: z.string().max(4000).default(''),
  method: z.enum(['GET', 'POST', 'PUT', 'PATCH', 'DELETE']).default('POST'),
  url: httpUrl,
  parameters: jsonSchemaObject.default({ type: 'object', properties: {} }),
  /** Where the parameters go: `query` (default for GET and DELETE) or a JSON `body`. */
  parameters_in: z.enum(['query', 'body']).optional(),
});
export type HttpToolSpec = z.infer<typeof httpToolSpec>;

export const httpSourceConfig = z.strictObject({
  tools: z
    .array(httpToolSpec)
    .min(1)
    .max(100)
    .refine((tools) => new Set(tools.map((t) => t.name)).size === tools.length, 'tool names must be unique'),
  headers,
  timeout_ms: timeoutMs,
});

export type McpStdioConfig = z.infer<typeof mcpStdioConfig>;
export type McpHttpConfig = z.infer<typeof mcpHttpConfig>;
export type HttpSourceConfig = z.infer<typeof httpSourceConfig>;

/** A validated source: the kind decides the shape of the config. */
export type SourceSpec =
  | { kind: 'mcp_stdio'; config: McpStdioConfig }
  | { kind: 'mcp_http'; config: McpHttpConfig }
  | { kind: 'http'; config: HttpSourceConfig };
export type McpSpec = Extract<SourceSpec, { kind: 'mcp_stdio' | 'mcp_http' }>;

const SCHEMAS = { mcp_stdio: mcpStdioConfig, mcp_http: mcpHttpConfig, http: httpSourceConfig } as const;

export function isSourceKind(kind: string): kind is SourceKind {
  return (SOURCE_KINDS as readonly string[]).includes(kind);
}

/** Validates a source config for its kind (defaults filled in); invalid_argument naming the field otherwise. */
export function parseSource(kind: string, config: unknown): SourceSpec {
  if (!isSourceKind(kind)) {
    throw new DomainError('invalid_argument', `kind: must be one of ${SOURCE_KINDS.join(', ')}`, { field: 'kind' });
  }
  const r = SCHEMAS[kind].safeParse(config ?? {});
  if (!r.success) {
    throw zodRefusal(r.error, 'config');
  }
  return { kind, config: r.data } as SourceSpec;
}

/** Every env reference of a source must be allowed (SECRET_ENV_ALLOWLIST); 400 naming the field otherwise. */
export function checkSourceEnvRefs(spec: SourceSpec, policy: SecretEnvPolicy): void {
  const refs: [string, Record<string, EnvRef>][] =
    spec.kind === 'mcp_stdio' ? [['config.env', spec.config.env]] : [['config.headers', spec.config.headers]];
  for (const [where, map] of refs) {
    for (const [key, ref] of Object.entries(map)) {
      checkEnvReference(ref.env, `${where}.${key}.env`, policy);
    }
  }
}

export function validateSourceId(sourceId: string): void {
  if (!SOURCE_ID_PATTERN.test(sourceId) || RESERVED_SOURCE_IDS.has(sourceId)) {
    throw new DomainError(
      'invalid_argument',
      'source_id: must be 1-64 lowercase letters, digits, "_" or "-" (starting with a letter or digit), and not a reserved word',
      { field: 'source_id' },
    );
  }
}

/**
 * Resolves `{NAME: {env, prefix}}` references through `secret` (AppConfig.secret: the host
 * environment, within SECRET_ENV_ALLOWLIST). A variable that is not set or no longer allowed
 * fails the connection (naming the variable, never a value).
 */
export function resolveEnvRefs(
  refs: Record<string, EnvRef>,
  what: string,
  secret: (name: string) => string | null,
): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [key, ref] of Object.entries(refs)) {
    const value = secret(ref.env);
    if (value === null) {
      throw new DomainError(
        'unavailable',
        `${what}.${key}: host environment variable ${ref.env} is not set or not allowed`,
        {
          env: ref.env,
        },
      );
    }
    out[key] = `${ref.prefix ?? ''}${value}`;
  }
  return out;
}
