import { Client } from 'pg';
import { BeginFailed, RIDERS_IN_ONE_WRITE, RiderQuery } from '../../libs/persistence/src/hot/pg-riders';

jest.setTimeout(60_000);

const URL = process.env.IT_PG_ADMIN_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const TABLE = `riders_${process.pid}`;

/**
 * `BEGIN` and `COMMIT` riding on a statement (libs/persistence/src/hot/pg-riders.ts), in one write
 * on this pg and awaited in turn where pg's Query cannot be driven: the same outcomes either way.
 */
describe('RiderQuery on postgres', () => {
  let writer: Client;
  let reader: Client;

  beforeAll(async () => {
    writer = new Client({ connectionString: URL });
    reader = new Client({ connectionString: URL });
    await Promise.all([writer.connect(), reader.connect()]);
    await writer.query(`CREATE TABLE ${TABLE} (id int PRIMARY KEY)`);
  });

  afterAll(async () => {
    await writer.query(`DROP TABLE IF EXISTS ${TABLE}`);
    await Promise.all([writer.end(), reader.end()]);
  });

  it('this pg is driven in one write', () => {
    expect(RIDERS_IN_ONE_WRITE).toBe(true);
  });

  const insert = (id: number) => ({ text: `INSERT INTO ${TABLE} (id) VALUES ($1)`, values: [id] });
  const count = async (id: number) =>
    Number((await reader.query(`SELECT count(*) AS n FROM ${TABLE} WHERE id = $1`, [id])).rows[0].n);

  for (const oneWrite of [true, false]) {
    const mode = oneWrite ? 'in one write' : 'in turn';

    it(`${mode}: BEGIN, the statement and COMMIT commit the row (${oneWrite ? 1 : 3} query calls)`, async () => {
      const id = oneWrite ? 1 : 2;
      const spy = jest.spyOn(writer, 'query');
      try {
        const r = await RiderQuery.run(writer, insert(id), true, true, oneWrite);
        expect(r.rowCount).toBe(1);
        expect(spy).toHaveBeenCalledTimes(oneWrite ? 1 : 3);
      } finally {
        spy.mockRestore();
      }
      expect(await count(id)).toBe(1);
    });

    it(`${mode}: a statement failing behind BEGIN throws its own error and commits nothing`, async () => {
      await writer.query(insert(oneWrite ? 10 : 20));
      const again = RiderQuery.run(writer, insert(oneWrite ? 10 : 20), true, false, oneWrite);
      await expect(again).rejects.toThrow(/duplicate key/);
      await expect(again).rejects.not.toBeInstanceOf(BeginFailed);
      await writer.query('ROLLBACK');
      expect(await count(oneWrite ? 10 : 20)).toBe(1);
    });

    it(`${mode}: BEGIN refused by a session left in an aborted transaction is BeginFailed; the statement did not run`, async () => {
      await writer.query('BEGIN');
      await writer.query('SELECT 1 / 0').catch(() => undefined);
      const id = oneWrite ? 30 : 40;
      await expect(RiderQuery.run(writer, insert(id), true, true, oneWrite)).rejects.toBeInstanceOf(BeginFailed);
      await writer.query('ROLLBACK');
      expect(await count(id)).toBe(0);
    });
  }
});
