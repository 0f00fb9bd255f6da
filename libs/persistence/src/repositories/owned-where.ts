import { In, type FindOptionsWhere } from 'typeorm';

/**
 * A listing's where-clause within `scope` (docs/tenancy.md#isolation): rows of those workspaces or
 * shared ones; null scope: every row.
 */
export function ownedWhere<T extends { workspace_id: string; shared: boolean }>(
  where: FindOptionsWhere<T>,
  scope: readonly string[] | null,
): FindOptionsWhere<T> | FindOptionsWhere<T>[] {
  if (scope === null) {
    return where;
  }
  return [
    { ...where, workspace_id: In([...scope]) },
    { ...where, shared: true },
  ] as FindOptionsWhere<T>[];
}
