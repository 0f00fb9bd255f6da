import { INT32_MAX } from './body-schema';
import { DomainError } from './errors';

/** One page of a list: `next_cursor` is null on the last page (docs/api.md). */
export interface Page<T> {
  items: T[];
  next_cursor: string | null;
}

/** The rows of one page, and the cursor of the next page (null on the last one). */
export interface PageRows<R> {
  rows: R[];
  has_more: boolean;
  next_cursor: string | null;
}

/**
 * Reads one page: asks `read` for one row more than `limit` to learn whether a next page exists
 * without counting, and cuts it off. `cursorOf` names the last row of the page for the next read.
 */
export async function readPage<R>(
  limit: number,
  read: (count: number) => Promise<R[]>,
  cursorOf: (last: R) => string | number,
): Promise<PageRows<R>> {
  return cutPage(await read(limit + 1), limit, cursorOf);
}

/** `readPage` for rows already read with `limit + 1`. */
export function cutPage<R>(rows: R[], limit: number, cursorOf: (last: R) => string | number): PageRows<R> {
  const has_more = rows.length > limit;
  const page = has_more ? rows.slice(0, limit) : rows;
  return { rows: page, has_more, next_cursor: has_more ? String(cursorOf(page[page.length - 1])) : null };
}

/** The largest row id a numeric cursor may carry (an int32 id column on both databases). */
export const MAX_ROW_ID = INT32_MAX;

/**
 * A numeric cursor (a row id) as a page request carries it: absent → null; anything but an
 * integer in 1..MAX_ROW_ID → `invalid_argument` naming the field.
 */
export function parseRowCursor(cursor: string | null | undefined, field = 'cursor'): number | null {
  if (cursor === null || cursor === undefined) {
    return null;
  }
  const id = Number(cursor);
  if (cursor.trim() === '' || !Number.isInteger(id) || id <= 0 || id > MAX_ROW_ID) {
    throw new DomainError('invalid_argument', `${field}: must be a cursor returned by a previous page`, { field });
  }
  return id;
}
