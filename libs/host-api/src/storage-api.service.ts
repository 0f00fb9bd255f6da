import { Injectable } from '@nestjs/common';
import type { StorageArea } from '@libs/authz';
import { StoresRepository } from '@libs/persistence';
import { DomainError } from '@libs/protocol';
import { WorkspaceQuotaGate, type RunGrant } from '@libs/runs';

/**
 * Byte storage per area; the owner comes from the run's snapshot, never from the caller. Keys and
 * areas are checked by the request schemas (@libs/protocol HOST_API_REQUESTS) before a call gets here.
 * Writes are fenced by the run's lease (docs/scale-out.md#fenced-host-api-writes).
 */
@Injectable()
export class StorageApiService {
  constructor(
    private readonly stores: StoresRepository,
    private readonly quotas: WorkspaceQuotaGate,
  ) {}

  private owner(run: RunGrant, area: StorageArea): string {
    return `${area}:${run.snapshot.storage[area]}`;
  }

  async get(run: RunGrant, area: StorageArea, key: string) {
    const row = await this.stores.storageGet(this.owner(run, area), key);
    if (!row) {
      throw new DomainError('not_found', `storage key "${key}" not found`, { field: 'key' });
    }
    return { value: Buffer.from(row.value_base64, 'base64') };
  }

  async set(run: RunGrant, area: StorageArea, key: string, value: Buffer) {
    const limit = run.snapshot.limits.max_storage_value_bytes;
    if (value.length > limit) {
      throw new DomainError('payload_too_large', `value: ${value.length} bytes exceeds the limit of ${limit} bytes`, {
        field: 'value',
        limit,
      });
    }
    // docs/tenancy.md#quotas: the workspace's storage bytes (429 naming max_storage_bytes).
    await this.quotas.storage(run.workspace_id ?? 'default', value.length);
    await this.stores.storageSet(this.owner(run, area), key, value, run.lease ?? null);
    return {};
  }

  async delete(run: RunGrant, area: StorageArea, key: string) {
    return { success: await this.stores.storageDelete(this.owner(run, area), key, run.lease ?? null) };
  }

  async list(run: RunGrant, area: StorageArea, prefix: string | undefined, limit: number | undefined) {
    const n = limit === undefined || limit <= 0 ? 100 : Math.min(limit, 100);
    const keys = await this.stores.storageKeys(this.owner(run, area), prefix ?? '', n + 1);
    return { keys: keys.slice(0, n), has_more: keys.length > n };
  }
}
