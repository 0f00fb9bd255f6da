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

/** The one 400 of a refused input: `field: rule` joined, the first field in `details.field`, all in `details.problems`. */
export function invalid(problems: Problem[]): DomainError {
  return new DomainError('invalid_argument', problems.map((p) => `${p.field}: ${p.rule}`).join('; '), {
    field: problems[0]?.field,
    problems,
  });
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
      return plainToInstance(metatype, {}, this.transformOptions);
    }
    return super.transform(value, metadata);
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
