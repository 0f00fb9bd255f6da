import { DomainError } from './errors';
import { cutPage, parseRowCursor, readPage } from './paging';

describe('readPage', () => {
  const rows = [{ id: 1 }, { id: 2 }, { id: 3 }];

  it('asks for one row more than the page and cuts it off, naming the last row as the cursor', async () => {
    const asked: number[] = [];
    const page = await readPage(
      2,
      (n) => {
        asked.push(n);
        return Promise.resolve(rows.slice(0, n));
      },
      (r) => r.id,
    );
    expect(asked).toEqual([3]);
    expect(page).toEqual({ rows: [{ id: 1 }, { id: 2 }], has_more: true, next_cursor: '2' });
  });

  it('has no next cursor on the last page, also when the page is exactly full', () => {
    expect(cutPage(rows, 3, (r) => r.id)).toEqual({ rows, has_more: false, next_cursor: null });
    expect(cutPage([], 3, (r: { id: number }) => r.id)).toEqual({ rows: [], has_more: false, next_cursor: null });
  });
});

describe('parseRowCursor', () => {
  it('reads a row id and treats an absent cursor as the first page', () => {
    expect(parseRowCursor('42')).toBe(42);
    expect(parseRowCursor(undefined)).toBeNull();
    expect(parseRowCursor(null)).toBeNull();
  });

  it.each(['', ' ', '0', '-1', '1.5', 'abc', '2147483648', '1e3x'])('refuses %j naming the field', (raw) => {
    let error: unknown;
    try {
      parseRowCursor(raw, 'before');
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(DomainError);
    expect((error as DomainError).code).toBe('invalid_argument');
    expect((error as DomainError).message).toBe('before: must be a cursor returned by a previous page');
  });
});
