import type { z } from 'zod';
import { DomainError } from './errors';
import { joinPath } from './json-limits';

/**
 * The most problems one refusal lists (docs/api.md#validation): an input can break a rule per
 * value (50,000 unknown keys are 50,000 problems), and listing each costs host CPU and answer
 * bytes per problem. The HTTP edge's `400` (apps/host/src/filters/validation.ts) and the zod
 * refusals below share it.
 */
export const MAX_LISTED_PROBLEMS = 100;

/**
 * "field.path: rule" lines for a zod failure, prefixed with the payload's name: at most
 * `MAX_LISTED_PROBLEMS` of them — an unknown key counts as one, zod reports them in one issue —,
 * then `; and N more problems` when there were more (docs/api.md#validation).
 */
export function describeIssues(error: z.ZodError, root: string): string {
  const lines: string[] = [];
  let room = MAX_LISTED_PROBLEMS;
  let total = 0;
  for (const issue of error.issues) {
    const path = [root, ...issue.path.map(String)].filter(Boolean).join('.');
    const count = issue.code === 'unrecognized_keys' ? issue.keys.length : 1;
    total += count;
    if (room === 0) {
      continue;
    }
    if (issue.code === 'unrecognized_keys' && count > room) {
      // zod's own sentence, with the keys there is room for.
      const shown = issue.keys.slice(0, room);
      lines.push(
        `${path}: Unrecognized key${shown.length > 1 ? 's' : ''}: ${shown.map((k) => JSON.stringify(k)).join(', ')}`,
      );
      room = 0;
    } else {
      lines.push(`${path}: ${issue.message}`);
      room -= count;
    }
  }
  const more = total - (MAX_LISTED_PROBLEMS - room);
  return more > 0 ? `${lines.join('; ')}; and ${more} more problems` : lines.join('; ');
}

/** A field-named rule break, as every refused input's `details.problems` lists it (docs/api.md#validation). */
export interface Problem {
  field: string;
  rule: string;
}

/**
 * The problems of a zod failure, one per broken rule, as the HTTP edge's `400` lists them: the
 * field in the same path as the message's sentence (`root.a.b`), an unknown key as its own field
 * with the edge's rule (`property K should not exist`); at most `MAX_LISTED_PROBLEMS` of them, and
 * `total` counting every problem (each unknown key is one).
 */
export function zodProblems(error: z.ZodError, root: string): { problems: Problem[]; total: number } {
  const problems: Problem[] = [];
  let total = 0;
  for (const issue of error.issues) {
    const path = [root, ...issue.path.map(String)].filter(Boolean).join('.');
    if (issue.code === 'unrecognized_keys') {
      total += issue.keys.length;
      for (const key of issue.keys) {
        if (problems.length === MAX_LISTED_PROBLEMS) {
          break;
        }
        problems.push({ field: joinPath(path, key), rule: `property ${key} should not exist` });
      }
    } else {
      total += 1;
      if (problems.length < MAX_LISTED_PROBLEMS) {
        problems.push({ field: path, rule: issue.message });
      }
    }
  }
  return { problems, total };
}

/**
 * The `invalid_argument` of a zod-checked field (an agent policy, a tool's `config`, a model
 * message): `describeIssues`' sentence, `details.field` the field, `details.problems` the listed
 * problems and, when more were found, their number in `details.problems_omitted` — the shape of
 * every other refused input (docs/api.md#validation).
 */
export function zodRefusal(error: z.ZodError, field: string): DomainError {
  const { problems, total } = zodProblems(error, field);
  const omitted = total - problems.length;
  return new DomainError(
    'invalid_argument',
    describeIssues(error, field),
    omitted > 0 ? { field, problems, problems_omitted: omitted } : { field, problems },
  );
}
