import { ValidationPipe, type ArgumentMetadata, type Type, type ValidationError } from '@nestjs/common';
import { plainToInstance } from 'class-transformer';
import { getMetadataStorage, type ValidatorOptions } from 'class-validator';
import { checkJson, DomainError, joinPath, MAX_LISTED_PROBLEMS } from '@libs/protocol';

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

/** The most problems one 400 lists (docs/api.md#validation), shared with the zod refusals' sentences. */
export { MAX_LISTED_PROBLEMS };

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
  /** Per DTO class: its properties (those with a rule; the others are unknown) and its open maps. */
  private readonly shapes = new Map<Type<unknown>, DtoShape>();
  /**
   * The open maps of the value `super.transform` is about to turn into an instance, set just
   * before the call and taken back by `validate`, which Nest's pipe calls synchronously after
   * class-transformer (no await between them): see `detachOpenMaps`.
   */
  private detached: Map<string, unknown> | null = null;

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
    if (!metatype || !this.toValidate(metadata) || !isPlainObject(value)) {
      return super.transform(value, metadata);
    }
    const shape = this.shapeOf(metatype);
    const unknown = Object.keys(value).filter((k) => !shape.known.has(k));
    if (unknown.length > MAX_LISTED_PROBLEMS) {
      return this.refuseUnknown(value, unknown, metadata);
    }
    return this.transformDetached(value, shape, metadata);
  }

  /**
   * More unknown keys than a 400 lists: the first `MAX_LISTED_PROBLEMS` of them are the listed
   * problems (class-validator reports unknown keys first, in the value's order), the others are
   * counted, and the known keys are checked alone for the count of their own problems — without
   * class-transformer and class-validator walking every unknown key (docs/api.md#validation).
   */
  private async refuseUnknown(
    value: Record<string, unknown>,
    unknown: string[],
    metadata: ArgumentMetadata,
  ): Promise<never> {
    const rest: Record<string, unknown> = {};
    for (const k of this.shapeOf(metadata.metatype as Type<unknown>).known) {
      if (Object.hasOwn(value, k)) {
        rest[k] = value[k];
      }
    }
    let restProblems = 0;
    try {
      await this.transform(rest, metadata);
    } catch (e) {
      const details =
        e instanceof DomainError ? (e.details as { problems?: unknown[]; problems_omitted?: number }) : null;
      if (!details?.problems) {
        throw e;
      }
      restProblems = details.problems.length + (details.problems_omitted ?? 0);
    }
    const listed = unknown
      .slice(0, MAX_LISTED_PROBLEMS)
      .map((k) => ({ field: joinPath('', k), rule: `property ${k} should not exist` }));
    throw invalid(listed, unknown.length + restProblems);
  }

  /**
   * `super.transform` with the value's open maps (a property whose rule is a JSON object) taken
   * out while class-transformer copies the value: class-transformer walks every key of every
   * nested object and deduplicates each object's keys in quadratic time (an open map of 40,000
   * keys took ~0.8 s before its size rule refused it, docs/benchmarks.md). The rules see the
   * maps themselves (`validate` puts them back on the instance first); no rule looks inside one
   * but its own (`IsJsonMap` sizes it), so the answer is the same.
   */
  private async transformDetached(
    value: Record<string, unknown>,
    shape: DtoShape,
    metadata: ArgumentMetadata,
  ): Promise<unknown> {
    let detached: Map<string, unknown> | null = null;
    let copy = value;
    for (const k of shape.openMaps) {
      if (Object.hasOwn(value, k) && isPlainObject(value[k])) {
        if (!detached) {
          detached = new Map();
          copy = { ...value };
        }
        // Nest's pipe strips these keys from every nested object it walks; the map keeps that.
        this.stripProtoKeys(value[k]);
        detached.set(k, value[k]);
        copy[k] = OPEN_MAP_STAND_IN;
      }
    }
    if (!detached) {
      return super.transform(value, metadata);
    }
    this.detached = detached;
    try {
      return await super.transform(copy, metadata);
    } finally {
      if (this.detached === detached) {
        this.detached = null;
      }
    }
  }

  protected override validate(
    object: object,
    validatorOptions?: ValidatorOptions,
  ): Promise<ValidationError[]> | ValidationError[] {
    const detached = this.detached;
    this.detached = null;
    if (detached) {
      for (const [k, v] of detached) {
        if (Reflect.get(object, k) === OPEN_MAP_STAND_IN) {
          Reflect.set(object, k, v);
        }
      }
    }
    return super.validate(object, validatorOptions);
  }

  /** The DTO class's properties with a rule (class-validator's whitelist) and those whose rule is a JSON object. */
  private shapeOf(metatype: Type<unknown>): DtoShape {
    let shape = this.shapes.get(metatype);
    if (!shape) {
      const rules = getMetadataStorage().getTargetValidationMetadatas(metatype, '', false, false);
      const known = new Set(rules.map((m) => m.propertyName));
      const openMaps = [...known].filter(
        (p) =>
          rules.some((m) => m.propertyName === p && (m.name === 'isJsonMap' || m.name === 'isObject')) &&
          !rules.some((m) => m.propertyName === p && m.type === 'nestedValidation'),
      );
      shape = { known, openMaps };
      this.shapes.set(metatype, shape);
    }
    return shape;
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

interface DtoShape {
  known: Set<string>;
  openMaps: string[];
}

/**
 * What class-transformer copies in an open map's place (a string: copied as it is, and no
 * input holds a NUL, docs/api.md#validation); `validate` swaps the map back in.
 */
const OPEN_MAP_STAND_IN = '\u0000open map';

/** A plain object (or a query's null-prototype one). */
function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    return false;
  }
  const proto: unknown = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
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
  if (proto !== Object.prototype && proto !== null) {
    return false;
  }
  // The first own key answers without listing them all (a body can hold 50,000).
  for (const k in value) {
    if (Object.hasOwn(value, k)) {
      return false;
    }
  }
  return Reflect.ownKeys(value).length === 0;
}

export function validationPipe(): ValidationPipe {
  return new HostValidationPipe();
}
