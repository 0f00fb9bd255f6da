import { Injectable } from '@nestjs/common';
import { HotStore } from '../hot/hot-store';
import { stmt } from '../hot/hot-sql';
import { one } from '../hot/unit';

const VERSION = stmt('catalog_version', 'SELECT "version" FROM "catalog_version" WHERE "id" = 1');

/**
 * The catalogue version row (docs/scale-out.md#admin-writes): bumped by a trigger in the same
 * transaction as every write of a catalogue table (migration 1767640000000), read by admission at
 * any process — one primary-key read of one row, through the hot store's read path.
 */
@Injectable()
export class CatalogVersionRepository {
  constructor(private readonly hot: HotStore) {}

  /** The committed version now. */
  async read(): Promise<number> {
    const r = await this.hot.read(one<{ version: string | number }>(VERSION, []));
    if (!r) {
      throw new Error('catalog_version: the row is missing (migration 1767640000000 not applied?)');
    }
    return Number(r.version);
  }
}
