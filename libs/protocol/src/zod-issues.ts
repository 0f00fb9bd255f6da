import type { z } from 'zod';

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
