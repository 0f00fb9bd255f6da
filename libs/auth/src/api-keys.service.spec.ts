import type { AppConfig } from '@libs/config';
import type { ApiKeyEntity, ApiKeysRepository } from '@libs/persistence';
import { ApiKeysService, VERIFIED_KEYS_CAPACITY } from './api-keys.service';
import { hashSecret } from './secrets';

/** The repository's key table in memory; `gate` holds the next findActiveByHash until released. */
class FakeKeys {
  rows: ApiKeyEntity[] = [];
  reads = 0;
  gate: Promise<void> | null = null;

  create(key: ApiKeyEntity): Promise<ApiKeyEntity> {
    this.rows.push({ ...key });
    return Promise.resolve(key);
  }
  async findActiveByHash(hash: string): Promise<ApiKeyEntity | null> {
    this.reads++;
    const row = this.rows.find((k) => k.key_hash === hash && k.revoked_at === null);
    const found = row ? { ...row } : null; // read now, answered after the gate (a slow database)
    if (this.gate) {
      await this.gate;
    }
    return found;
  }
  get(id: string): Promise<ApiKeyEntity | null> {
    return Promise.resolve(this.rows.find((k) => k.id === id) ?? null);
  }
  revoke(id: string, at: number): Promise<boolean> {
    const row = this.rows.find((k) => k.id === id && k.revoked_at === null);
    if (row) {
      row.revoked_at = at;
    }
    return Promise.resolve(row !== undefined);
  }
}

describe('ApiKeysService.authenticate: verified keys remembered by secret (docs/security.md#credential-caches)', () => {
  let repo: FakeKeys;
  let service: ApiKeysService;
  const admin = { key_id: 'root', role: 'admin' as const, workspaces: null };

  beforeEach(() => {
    repo = new FakeKeys();
    service = new ApiKeysService(repo as unknown as ApiKeysRepository, {} as AppConfig);
  });

  it('reads the database once for a valid key, then answers from memory; refusals are read every time', async () => {
    const created = await service.create('p', 'platform', ['w1']);
    const first = await service.authenticate(created.key);
    expect(first).toEqual({ key_id: created.id, role: 'platform', workspaces: ['w1'] });
    expect(Object.isFrozen(first) && Object.isFrozen(first?.workspaces)).toBe(true);
    expect(await service.authenticate(created.key)).toBe(first);
    expect(repo.reads).toBe(1);
    expect(await service.authenticate('rhk_nope')).toBeNull();
    expect(await service.authenticate('rhk_nope')).toBeNull();
    expect(repo.reads).toBe(3);
  });

  it('refuses a revoked key on the very next call, and keeps the others', async () => {
    const a = await service.create('a', 'platform', ['w1']);
    const b = await service.create('b', 'platform', ['w1']);
    await service.authenticate(a.key);
    await service.authenticate(b.key);
    await service.revoke(a.id, admin);
    expect(await service.authenticate(a.key)).toBeNull();
    expect((await service.authenticate(b.key))?.key_id).toBe(b.id);
  });

  it('does not remember a key read before a revocation that lands while the read is in flight', async () => {
    const a = await service.create('a', 'platform', ['w1']);
    let release!: () => void;
    repo.gate = new Promise((r) => (release = r));
    const racing = service.authenticate(a.key); // reads the row while it is still active
    await new Promise((r) => setImmediate(r));
    repo.gate = null;
    await service.revoke(a.id, admin);
    release();
    expect(await racing).toBeNull(); // read again after the revocation
    expect(await service.authenticate(a.key)).toBeNull();
  });

  it('a refused secret never makes a valid key fail later, and a key created after a refusal passes at once', async () => {
    const before = await service.authenticate('rhk_made_later');
    expect(before).toBeNull();
    await repo.create({
      id: 'later',
      name: 'later',
      role: 'platform',
      key_hash: hashSecret('rhk_made_later'),
      key_prefix: 'rhk_made_l',
      workspace_ids: ['w1'],
      created_at: 0,
      revoked_at: null,
    });
    expect((await service.authenticate('rhk_made_later'))?.key_id).toBe('later');
  });

  it('remembers at most VERIFIED_KEYS_CAPACITY keys', async () => {
    const keys = [];
    for (let i = 0; i < VERIFIED_KEYS_CAPACITY + 5; i++) {
      keys.push(await service.create(`k${i}`, 'platform', ['w1']));
    }
    for (const k of keys) {
      await service.authenticate(k.key);
    }
    expect((service as unknown as { verified: { size: number } }).verified.size).toBe(VERIFIED_KEYS_CAPACITY);
    const reads = repo.reads;
    expect((await service.authenticate(keys[0].key))?.key_id).toBe(keys[0].id); // evicted: read again
    expect(repo.reads).toBe(reads + 1);
  });
});
