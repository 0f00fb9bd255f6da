import type { SecretEnvPolicy } from '@libs/config';
import { DomainError } from '@libs/protocol';

/**
 * The check every env reference passes where an admin writes it (a model's `api_key_env`, a tool
 * source's header or child-env reference): the name must be allowed by SECRET_ENV_ALLOWLIST.
 * Resolution checks again (`AppConfig.secret`), so narrowing the list later cuts off what was
 * registered before.
 */
export function checkEnvReference(name: string, field: string, policy: SecretEnvPolicy): void {
  if (!policy.allows(name)) {
    throw new DomainError(
      'invalid_argument',
      `${field}: ${name} is not a host variable models and tools may use: it must match SECRET_ENV_ALLOWLIST ` +
        `(${policy.entries.join(', ') || 'empty'}), and the host's own secrets are never allowed`,
      { field },
    );
  }
}
