import { DomainError } from './errors';

export const BUILTIN_LOCAL_AGENT_ID = 'builtin:local-agent/default';
const SEGMENT = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;

export interface PluginRunnerRef {
  author: string;
  plugin: string;
  runner: string;
}

export function isValidSegment(value: string): boolean {
  return SEGMENT.test(value);
}

/** `plugin:<author>/<plugin>/<runner>` */
export function pluginRunnerId(ref: PluginRunnerRef): string {
  return `plugin:${ref.author}/${ref.plugin}/${ref.runner}`;
}

export function pluginIdOf(author: string, name: string): string {
  return `${author}/${name}`;
}

/** Parses a plugin runner id; throws invalid_argument naming `field` when it is malformed. */
export function parseRunnerId(id: string, field = 'runner_id'): PluginRunnerRef | 'builtin' {
  if (id === BUILTIN_LOCAL_AGENT_ID) {
    return 'builtin';
  }
  const m = /^plugin:([^/]+)\/([^/]+)\/([^/]+)$/.exec(id);
  if (!m || !isValidSegment(m[1]) || !isValidSegment(m[2]) || !isValidSegment(m[3])) {
    throw new DomainError(
      'invalid_argument',
      `${field} must be "plugin:<author>/<plugin>/<runner>" or "${BUILTIN_LOCAL_AGENT_ID}"`,
      {
        field,
      },
    );
  }
  return { author: m[1], plugin: m[2], runner: m[3] };
}
