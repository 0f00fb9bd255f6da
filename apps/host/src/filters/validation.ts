import { ValidationPipe, type ArgumentMetadata, type Type, type ValidationError } from '@nestjs/common';
import { plainToInstance, TransformationType } from 'class-transformer';
import type { MetadataStorage } from 'class-transformer/types/MetadataStorage';
import { getMetadataStorage, type ValidatorOptions } from 'class-validator';
import { checkJson, DomainError, joinPath, MAX_LISTED_PROBLEMS, type Problem } from '@libs/protocol';

/** class-transformer's decorator metadata (`@Type`, `@Transform`, `@Expose`): its public index does not export it. */
// eslint-disable-next-line @typescript-eslint/no-require-imports -- the package's own storage module, typed by its .d.ts
const transformerMetadata = (require('class-transformer/cjs/storage') as { defaultMetadataStorage: MetadataStorage })
  .defaultMetadataStorage;

function flatten(errors: ValidationError[], parent = ''): Problem[] {
  return errors.flatMap((e) => {
    // Same path syntax as the JSON checker: a[0].b, a["odd key"] (an empty query key is `[""]`).
    const field = joinPath(parent, parent && /^\d+$/.test(e.property) ? Number(e.property) : e.property);
    const own = Object.values(e.constraints ?? {}).map((rule) => ({ field, rule }));
    return [...own, ...flatten(e.children ?? [], field)];
  });
}

/** A field-named rule break: `field` in the checker's path syntax, `rule` as the message states it. */
export type { Problem };

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
   * The values taken out of the input `super.transform` is about to turn into an instance, set just
   * before the call and taken back by `validate`, which Nest's pipe calls synchronously after
   * class-transformer (no await between them): see `standIn`.
   */
  private detached: Detached[] | null = null;

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
    const detached: Detached[] = [];
    const prepared = this.standIn(value, metatype, [], detached);
    if (prepared instanceof Crowded) {
      return this.refuseUnknown(value, prepared, metadata);
    }
    if (detached.length === 0) {
      return super.transform(value, metadata);
    }
    this.detached = detached;
    try {
      return await super.transform(prepared, metadata);
    } finally {
      if (this.detached === detached) {
        this.detached = null;
      }
    }
  }

  /**
   * `value` — an object at a DTO position: the input itself, or the value of a nested DTO property
   * (an array's items included) — as class-transformer is to get it. class-transformer walks every
   * key of every object it copies and deduplicates each object's keys in quadratic time (an object
   * of 50,000 keys took ~1.3 s before any rule ran, docs/benchmarks.md), so:
   * - a position with more than `MAX_LISTED_PROBLEMS` unknown keys is returned as `Crowded` (the
   *   caller refuses the input without class-transformer: `refuseUnknown`);
   * - the object value (array or object) of a property whose class-transformer step is a plain copy
   *   (no `@Type`, `@Transform` or `@Expose` on it) is replaced by a stand-in and kept in `detached`
   *   with its path; `validate` puts it back on the instance, so its rules see the caller's value —
   *   what the copy would have held —, not a copy of every key;
   * - a nested DTO value gets the same, one level down.
   * Returns `value` itself when nothing was replaced, else a shallow copy.
   */
  private standIn(
    value: Record<string, unknown>,
    metatype: Type<unknown>,
    path: readonly (string | number)[],
    detached: Detached[],
  ): Record<string, unknown> | Crowded {
    const shape = this.shapeOf(metatype);
    const unknown = Object.keys(value).filter((k) => !shape.known.has(k));
    if (unknown.length > MAX_LISTED_PROBLEMS) {
      return new Crowded(path, unknown, shape.known);
    }
    let copy = value;
    for (const k of shape.known) {
      const v = Object.hasOwn(value, k) ? value[k] : undefined;
      if (typeof v !== 'object' || v === null) {
        continue;
      }
      let replacement: unknown;
      const nested = shape.nested.get(k);
      if (nested) {
        const r = this.standInNested(v, nested, [...path, k], detached);
        if (r instanceof Crowded) {
          return r;
        }
        replacement = r;
      } else if (shape.copied.has(k)) {
        // Nest's pipe strips these keys from everything it walks; a detached value keeps that. It also
        // closes the gaps of sparse arrays (multipart fields): the inputs here are parsed JSON or a
        // query string (apps/host/src/edge/http-adapter.ts), which hold none, and the walk costs ~30 ms
        // per 40,000 keys.
        this.stripProtoKeys(v);
        detached.push({ path: [...path, k], value: v });
        replacement = COPIED_STAND_IN;
      }
      if (replacement === undefined || replacement === v) {
        continue;
      }
      if (copy === value) {
        copy = { ...value };
      }
      copy[k] = replacement;
    }
    return copy;
  }

  /** A nested DTO property's value through `standIn`: an object, or each object item of an array. */
  private standInNested(v: object, nested: Type<unknown>, path: (string | number)[], detached: Detached[]): unknown {
    if (isPlainObject(v)) {
      return this.standIn(v, nested, path, detached);
    }
    if (!Array.isArray(v)) {
      return v;
    }
    const original: unknown[] = v;
    let items = original;
    for (let i = 0; i < original.length; i++) {
      const item = original[i];
      if (!isPlainObject(item)) {
        continue;
      }
      const r = this.standIn(item, nested, [...path, i], detached);
      if (r instanceof Crowded) {
        return r;
      }
      if (r !== item) {
        if (items === original) {
          items = [...original];
        }
        items[i] = r;
      }
    }
    return items;
  }

  /**
   * More unknown keys at one DTO position (`crowded`) than a 400 lists: the first
   * `MAX_LISTED_PROBLEMS` of them are the listed problems (class-validator reports unknown keys
   * first, in the value's order), the others are counted, and the input with that position cut to
   * its known keys is checked for the count of its other problems — without class-transformer and
   * class-validator walking every unknown key (docs/api.md#validation).
   */
  private async refuseUnknown(
    value: Record<string, unknown>,
    crowded: Crowded,
    metadata: ArgumentMetadata,
  ): Promise<never> {
    let restProblems = 0;
    try {
      await this.transform(crowded.knownOnly(value), metadata);
    } catch (e) {
      const details =
        e instanceof DomainError ? (e.details as { problems?: unknown[]; problems_omitted?: number }) : null;
      if (!details?.problems) {
        throw e;
      }
      restProblems = details.problems.length + (details.problems_omitted ?? 0);
    }
    const at = crowded.path.reduce<string>((parent, key) => joinPath(parent, key), '');
    const listed = crowded.unknown
      .slice(0, MAX_LISTED_PROBLEMS)
      .map((k) => ({ field: joinPath(at, k), rule: `property ${k} should not exist` }));
    throw invalid(listed, crowded.unknown.length + restProblems);
  }

  protected override validate(
    object: object,
    validatorOptions?: ValidatorOptions,
  ): Promise<ValidationError[]> | ValidationError[] {
    const detached = this.detached;
    this.detached = null;
    for (const { path, value } of detached ?? []) {
      let parent: unknown = object;
      for (let i = 0; i < path.length - 1 && typeof parent === 'object' && parent !== null; i++) {
        parent = Reflect.get(parent, path[i]);
      }
      const last = path[path.length - 1];
      if (typeof parent === 'object' && parent !== null && Reflect.get(parent, last) === COPIED_STAND_IN) {
        Reflect.set(parent, last, value);
      }
    }
    return super.validate(object, validatorOptions);
  }

  /**
   * The DTO class's properties with a rule (class-validator's whitelist), its nested DTO properties
   * with their class, and the properties class-transformer only copies (no `@Type`, `@Transform` or
   * `@Expose` on them, no nested validation): fixed at boot, asked once per class.
   */
  private shapeOf(metatype: Type<unknown>): DtoShape {
    let shape = this.shapes.get(metatype);
    if (!shape) {
      const rules = getMetadataStorage().getTargetValidationMetadatas(metatype, '', false, false);
      const known = new Set(rules.map((m) => m.propertyName));
      const nested = new Map<string, Type<unknown>>();
      const copied = new Set<string>();
      for (const p of known) {
        const type = transformerMetadata.findTypeMetadata(metatype, p);
        if (rules.some((m) => m.propertyName === p && m.type === 'nestedValidation')) {
          const cls: unknown = type?.typeFunction();
          if (
            typeof cls === 'function' &&
            getMetadataStorage().getTargetValidationMetadatas(cls, '', false, false).length
          ) {
            nested.set(p, cls as Type<unknown>);
          }
        } else if (
          !type &&
          transformerMetadata.findTransformMetadatas(metatype, p, TransformationType.PLAIN_TO_CLASS).length === 0 &&
          !transformerMetadata.findExposeMetadata(metatype, p)
        ) {
          copied.add(p);
        }
      }
      shape = { known, nested, copied };
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
  /** Nested DTO properties (`@ValidateNested` with a `@Type` class that has rules), by name. */
  nested: Map<string, Type<unknown>>;
  /** Properties whose value class-transformer copies as it is (no decorator of its own on them). */
  copied: Set<string>;
}

/** A value taken out of the input while class-transformer copies it, and where it goes back. */
interface Detached {
  path: (string | number)[];
  value: unknown;
}

/** A DTO position with more unknown keys than a 400 lists (`HostValidationPipe.standIn`). */
class Crowded {
  constructor(
    readonly path: readonly (string | number)[],
    readonly unknown: string[],
    private readonly known: ReadonlySet<string>,
  ) {}

  /** The input with this position cut to its known keys (copies along the path, the input untouched). */
  knownOnly(root: Record<string, unknown>): Record<string, unknown> {
    const cut = (v: unknown, depth: number): unknown => {
      if (depth === this.path.length) {
        const kept: Record<string, unknown> = {};
        for (const k of this.known) {
          if (Object.hasOwn(v as object, k)) {
            kept[k] = (v as Record<string, unknown>)[k];
          }
        }
        return kept;
      }
      const key = this.path[depth];
      if (Array.isArray(v) && typeof key === 'number') {
        const items: unknown[] = [...(v as unknown[])];
        items[key] = cut(items[key], depth + 1);
        return items;
      }
      const copy: Record<string, unknown> = { ...(v as Record<string, unknown>) };
      copy[key] = cut(copy[key], depth + 1);
      return copy;
    };
    return cut(root, 0) as Record<string, unknown>;
  }
}

/**
 * What class-transformer copies in a detached value's place (a string: copied as it is, and no
 * input holds a NUL, docs/api.md#validation); `validate` swaps the value back in.
 */
const COPIED_STAND_IN = '\u0000copied value';

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
