/**
 * The one rule for every reference to a host environment variable that the host hands to a model
 * or a tool (a model's `api_key_env`, tool-source header and child-env references): the name must
 * be on SECRET_ENV_ALLOWLIST, and never one of the host's own secrets, whatever the list says.
 * An allowlist, not a denylist: a variable added to the host's environment later is not exposed
 * to an admin-chosen URL or command by default.
 */

/** Names ending in `*` are prefixes; others are exact names. */
export const DEFAULT_SECRET_ENV_ALLOWLIST = 'RUNNERHOST_SECRET_*,OPENAI_API_KEY';

/**
 * A host environment variable name as a model, a tool source or a webhook policy names it
 * (letters, digits, "_"; at most 128 characters): the one pattern, with its rule's text.
 */
export const ENV_NAME_PATTERN = /^[A-Za-z_][A-Za-z0-9_]{0,127}$/;
export const ENV_NAME_RULE = 'must be an environment variable name (letters, digits, "_"; not a key value)';

/** One allowlist entry: an environment variable name, optionally ending in `*` (a prefix). */
export const SECRET_ENV_ENTRY = /^[A-Za-z_][A-Za-z0-9_]*\*?$/;

/**
 * The host's own secrets and the locations of its keys: never handed out, even when an operator's
 * allowlist (say a prefix `*`-entry) would match them.
 */
const HOST_OWN =
  /^(ADMIN_API_KEY|DATABASE_URL|SECRET_ENV_ALLOWLIST|TLS_.*|GRPC_TLS_.*|PG[A-Z]*|RUNNERHOST_PLUGIN_TOKEN)$/i;

export interface SecretEnvPolicy {
  /** The entries, as configured (for messages and the README). */
  readonly entries: readonly string[];
  allows(name: string): boolean;
}

export function parseSecretEnvAllowlist(value: string | undefined): string[] {
  return (value ?? DEFAULT_SECRET_ENV_ALLOWLIST)
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
}

export function secretEnvPolicy(entries: readonly string[]): SecretEnvPolicy {
  const exact = new Set(entries.filter((e) => !e.endsWith('*')));
  const prefixes = entries.filter((e) => e.endsWith('*')).map((e) => e.slice(0, -1));
  return {
    entries,
    allows: (name) => !HOST_OWN.test(name) && (exact.has(name) || prefixes.some((p) => name.startsWith(p))),
  };
}
