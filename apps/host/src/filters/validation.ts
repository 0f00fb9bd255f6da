import { ValidationPipe, type ArgumentMetadata, type ValidationError } from '@nestjs/common';
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
    return super.transform(value, metadata);
  }
}

export function validationPipe(): ValidationPipe {
  return new HostValidationPipe();
}
