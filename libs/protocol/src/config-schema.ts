import type { ConfigSchemaItem } from './manifest';

export const DEFAULT_RUN_TIMEOUT_SECONDS = 300;
/**
 * One year. The deadline is stored as epoch milliseconds (BIGINT) and sent as a double: a larger
 * timeout (1e300) would overflow both, and no run is meant to outlive a year.
 */
export const MAX_RUN_TIMEOUT_SECONDS = 31_536_000;

type Check = (value: unknown, item: ConfigSchemaItem) => string | null;

const isString: Check = (v) => (typeof v === 'string' ? null : 'must be a string');
const isInteger: Check = (v) => (typeof v === 'number' && Number.isInteger(v) ? null : 'must be an integer');
const isNumber: Check = (v) => (typeof v === 'number' && Number.isFinite(v) ? null : 'must be a number');
const isBoolean: Check = (v) => (typeof v === 'boolean' ? null : 'must be a boolean');
const isArray: Check = (v) => (Array.isArray(v) ? null : 'must be an array');
const isOption: Check = (v, item) => {
  const allowed: unknown[] = (item.options ?? []).map((o) => o.name ?? o.value).filter((x) => x !== undefined);
  if (allowed.length === 0) {
    return isString(v, item);
  }
  return allowed.includes(v) ? null : `must be one of ${allowed.map((a) => JSON.stringify(a)).join(', ')}`;
};
const isModelSelection: Check = (v) =>
  typeof v === 'string' || (typeof v === 'object' && v !== null && 'primary' in v)
    ? null
    : 'must be a model id or {primary, fallbacks}';

/** Value rules of the DynamicForm item types the host knows; other types are not checked. */
const CHECKS: Record<string, Check> = {
  string: isString,
  text: isString,
  textarea: isString,
  password: isString,
  secret: isString,
  integer: isInteger,
  int: isInteger,
  number: isNumber,
  float: isNumber,
  boolean: isBoolean,
  bool: isBoolean,
  select: isOption,
  array: isArray,
  'prompt-editor': isArray,
  'knowledge-base-multi-selector': isArray,
  'select-knowledge-bases': isArray,
  'llm-model-selector': isString,
  'select-llm-model': isString,
  'rerank-model-selector': isString,
  'model-fallback-selector': isModelSelection,
};

/**
 * Checks a runner config against the runner's config_schema. Returns one "field: rule" line per
 * problem (empty when valid). Keys the schema does not name are allowed (runners may read more).
 */
export function validateRunnerConfig(config: Record<string, unknown>, schema: ConfigSchemaItem[]): string[] {
  const problems: string[] = [];
  for (const item of schema) {
    const value = config[item.name];
    if (value === undefined || value === null) {
      if (item.required && (item.default === undefined || item.default === null)) {
        problems.push(`runner_config.${item.name}: is required`);
      }
      continue;
    }
    const check = CHECKS[item.type];
    const problem = check ? check(value, item) : null;
    if (problem) {
      problems.push(`runner_config.${item.name}: ${problem}`);
    }
  }
  const timeout = config.timeout;
  if (
    timeout !== undefined &&
    timeout !== null &&
    (typeof timeout !== 'number' || !(timeout >= 0) || !(timeout <= MAX_RUN_TIMEOUT_SECONDS))
  ) {
    problems.push(
      `runner_config.timeout: must be a number of seconds from 0 to ${MAX_RUN_TIMEOUT_SECONDS} (0 or null: no deadline)`,
    );
  }
  return problems;
}

/** Seconds until the run's deadline: default 300; 0 or null means no deadline. */
export function runTimeoutSeconds(config: Record<string, unknown>): number | null {
  if (!('timeout' in config) || config.timeout === undefined) {
    return DEFAULT_RUN_TIMEOUT_SECONDS;
  }
  const t = config.timeout;
  // An agent stored before the range check could hold any number: never past the largest allowed.
  return typeof t === 'number' && t > 0 ? Math.min(t, MAX_RUN_TIMEOUT_SECONDS) : null;
}
