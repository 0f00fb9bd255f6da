import { ValidationPipe, type ArgumentMetadata, type Type, type ValidationError } from '@nestjs/common';
import { plainToInstance } from 'class-transformer';
import { checkJson, DomainError, joinPath } from '@libs/protocol';

function flatten(errors: ValidationError[], parent = ''): Problem[] {
  return errors.flatMap((e) => {
    // Same path syntax as the JSON checker: a[0].b, a["odd key"] (an empty query key is `[""]`).
    const field = joinPath(parent, parent && /^\d+$/.test(e.property) ? Number(e.property) : e.property);
    const own = Object.values(e.constraints ?? {}).map((rule) => ({ field, rule }));
    return [...own, ...flatten(e.children ?? [], field)];
  });
}

/** A field-named rule break: `field` in the checker's path syntax, `rule` as the message states it. */
export interface Problem {
  field: string;
  rule: string;
}

/**
 * The most problems one 400 lists (docs/api.md#validation): a body can break a rule per value (up
 * to the 50,000 values of a body), and listing each costs host CPU and answer bytes per problem.
 */
export const MAX_LISTED_PROBLEMS = 100;

/**
 * The one 400 of a refused input: `field: rule` joined, the first field in `details.field`, the
 * first `MAX_LISTED_PROBLEMS` in `details.problems`, and when more were found (`total`, or more
 * `problems` than that) their number in `details.problems_omitted` (docs/api.md#validation).
 */
export function invalid(problems: Problem[], total = problems.length): DomainError {
  const listed = problems.length > MAX_LISTED_PROBLEMS ? problems.slice(0, MAX_LISTED_PROBLEMS) : problems;
  const omitted = Math.max(total, problems.length) - listed.length;
  const message = listed.map((p) => `${p.field}: ${p.rule}`).join('; ');
  return new DomainError(
    'invalid_argument',
    omitted > 0 ? `${message}; and ${omitted} more problems (details.problems_omitted)` : message,
    omitted > 0
      ? { field: listed[0]?.field, problems: listed, problems_omitted: omitted }
      : { field: listed[0]?.field, problems: listed },
  );
}

/**
 * The one request validation pipe. First the shared JSON limits (depth, NUL and lone surrogates,
 * finite numbers) on the raw body, query and path parameters — iteratively, before
 * class-transformer recurses into the value —, then the DTO rules. Strips nothing silently:
 * unknown fields are errors naming the field.
 */
export class HostValidationPipe extends ValidationPipe {
  /**
   * Per DTO class: whether `{}` keeps its rules. The rules of a class are fixed at boot (decorators,
   * no custom or conditional validators), so the answer for an empty input never changes.
   */
  private readonly emptyKeepsRules = new Map<Type<unknown>, Promise<boolean>>();
  /** Per DTO class: whether class-transformer's instance of `{}` is a bare `new` (see `emptyInstance`). */
  private readonly emptyIsBare = new Map<Type<unknown>, boolean>();

  constructor() {
    super({
      transform: true,
      whitelist: true,
      forbidNonWhitelisted: true,
      exceptionFactory: (errors) => invalid(flatten(errors)),
    });
  }

  override async transform(value: unknown, metadata: ArgumentMetadata): Promise<unknown> {
    if (metadata.type === 'body' || metadata.type === 'query' || metadata.type === 'param') {
      const problem = checkJson(value, metadata.data ?? '');
      if (problem) {
        throw invalid([problem]);
      }
    }
    const metatype = metadata.metatype;
    if (isEmptyObject(value) && metatype && this.toValidate(metadata) && (await this.emptyPasses(metatype, metadata))) {
      // The common case of a stream or page GET without a query string: the instance the full pass
      // would build, without running class-validator on nothing (docs/architecture.md#validation).
      return this.emptyInstance(metatype);
    }
    return super.transform(value, metadata);
  }

  /**
   * The instance class-transformer builds of `{}`: a plain `new metatype()` when, asked once per
   * class, class-transformer's own answer for `{}` is just that (own keys and primitive values the
   * same: no transform or default applies to an absent key); otherwise class-transformer's, every
   * time. A stream GET without a query string per run: docs/benchmarks.md#host-cpu-per-run-outside-the-database.
   */
  private emptyInstance(metatype: Type<unknown>): unknown {
    const bare = this.emptyIsBare.get(metatype);
    if (bare === true) {
      return new metatype();
    }
    const built = plainToInstance(metatype, {}, this.transformOptions);
    if (bare === undefined) {
      this.emptyIsBare.set(metatype, sameOwnPrimitives(built, new metatype()));
    }
    return built;
  }

  /** Whether the full pass admits `{}` for `metatype`, asked once per class. */
  private emptyPasses(metatype: Type<unknown>, metadata: ArgumentMetadata): Promise<boolean> {
    let verdict = this.emptyKeepsRules.get(metatype);
    if (verdict === undefined) {
      verdict = super.transform({}, metadata).then(
        () => true,
        () => false,
      );
      this.emptyKeepsRules.set(metatype, verdict);
    }
    return verdict;
  }
}

/** Same prototype, same own keys, each value the same primitive (undefined included). */
export function sameOwnPrimitives(a: unknown, b: unknown): boolean {
  if (typeof a !== 'object' || a === null || typeof b !== 'object' || b === null) {
    return false;
  }
  if (Object.getPrototypeOf(a) !== Object.getPrototypeOf(b)) {
    return false;
  }
  const keys = Reflect.ownKeys(a);
  const other = Reflect.ownKeys(b);
  if (keys.length !== other.length) {
    return false;
  }
  return keys.every((k, i) => {
    const v: unknown = Reflect.get(a, k);
    return (
      k === other[i] &&
      (typeof v !== 'object' || v === null) &&
      typeof v !== 'function' &&
      Object.is(v, Reflect.get(b, k))
    );
  });
}

/** A plain object (or a query's null-prototype one) with no own keys. */
function isEmptyObject(value: unknown): value is Record<string, never> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    return false;
  }
  const proto: unknown = Object.getPrototypeOf(value);
  return (proto === Object.prototype || proto === null) && Reflect.ownKeys(value).length === 0;
}

export function validationPipe(): ValidationPipe {
  return new HostValidationPipe();
}
