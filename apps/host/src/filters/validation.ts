import { ValidationPipe, type ValidationError } from '@nestjs/common';
import { DomainError } from '@libs/protocol';

function flatten(errors: ValidationError[], parent = ''): { field: string; rule: string }[] {
  return errors.flatMap((e) => {
    const field = parent
      ? /^\d+$/.test(e.property)
        ? `${parent}[${e.property}]`
        : `${parent}.${e.property}`
      : e.property;
    const own = Object.values(e.constraints ?? {}).map((rule) => ({ field, rule }));
    return [...own, ...flatten(e.children ?? [], field)];
  });
}

/** The one request validation pipe: strips nothing silently — unknown fields are errors naming the field. */
export function validationPipe(): ValidationPipe {
  return new ValidationPipe({
    transform: true,
    whitelist: true,
    forbidNonWhitelisted: true,
    exceptionFactory: (errors) => {
      const problems = flatten(errors);
      return new DomainError('invalid_argument', problems.map((p) => `${p.field}: ${p.rule}`).join('; '), {
        field: problems[0]?.field,
        problems,
      });
    },
  });
}
