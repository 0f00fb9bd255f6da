import type { z } from 'zod';

/** "field.path: rule" lines for a zod failure, prefixed with the payload's name. */
export function describeIssues(error: z.ZodError, root: string): string {
  return error.issues
    .map((issue) => {
      const path = [root, ...issue.path.map(String)].filter(Boolean).join('.');
      return `${path}: ${issue.message}`;
    })
    .join('; ');
}
