import { ParseUUIDPipe } from '@nestjs/common';
import { Transform } from 'class-transformer';
import { ValidateBy, type ValidationOptions } from 'class-validator';
import { DomainError, INT32_MAX, OPEN_MAP_MAX_BYTES, jsonBytes } from '@libs/protocol';

// The bounds the DTOs share with the body schemas come from the protocol (one place).
export { INT32_MAX, MAX_EPOCH_SECONDS, OPEN_MAP_MAX_BYTES } from '@libs/protocol';

/** The `run_id` path parameter: a UUID, else 400 naming it. */
export const runIdPipe = new ParseUUIDPipe({
  exceptionFactory: () => new DomainError('invalid_argument', 'run_id: must be a UUID', { field: 'run_id' }),
});

/**
 * An open JSON object (not an array, not null) of at most `maxBytes` UTF-8 bytes of JSON. Depth,
 * NUL characters and lone surrogates inside it are checked once for the whole body by the
 * validation pipe (libs/protocol json-limits).
 */
export function IsJsonMap(maxBytes = OPEN_MAP_MAX_BYTES, options?: ValidationOptions): PropertyDecorator {
  return ValidateBy(
    {
      name: 'isJsonMap',
      validator: {
        validate: (v: unknown) => typeof v === 'object' && v !== null && !Array.isArray(v) && jsonBytes(v) <= maxBytes,
        defaultMessage: (args) =>
          typeof args?.value === 'object' && args.value !== null && !Array.isArray(args.value)
            ? `must be at most ${maxBytes} bytes of JSON`
            : 'must be a JSON object',
      },
    },
    options,
  );
}

/**
 * A cursor naming a row of an INTEGER key: 1 to 2147483647 in decimal digits. Larger values
 * cannot name a row, and PostgreSQL refuses to compare them with an integer column.
 */
export function IsIntCursor(options?: ValidationOptions): PropertyDecorator {
  return ValidateBy(
    {
      name: 'isIntCursor',
      validator: {
        validate: (v: unknown) => typeof v === 'string' && /^\d{1,10}$/.test(v) && Number(v) <= INT32_MAX,
        defaultMessage: () => `must be a cursor returned by a previous page (an integer from 0 to ${INT32_MAX})`,
      },
    },
    options,
  );
}

/**
 * `null` reads as absent: for an optional admin field whose `null` has no meaning of its own (an
 * agent `PUT`'s `version`, a workspace `PUT`'s `name`), so that `null` on an optional field clears it
 * or equals absent, never a 400 or 409 of its own (docs/api.md, "null in admin bodies"). Put it
 * before the field's other rules; with `@IsOptional()` they then see no value.
 */
export const NullIsAbsent = (): PropertyDecorator =>
  Transform(({ value }: { value: unknown }) => (value === null ? undefined : value));
