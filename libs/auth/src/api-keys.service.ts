import * as fs from 'node:fs';
import * as path from 'node:path';
import { randomUUID } from 'node:crypto';
import { Inject, Injectable, Logger, type OnApplicationBootstrap } from '@nestjs/common';
import { APP_CONFIG, type AppConfig } from '@libs/config';
import { ApiKeysRepository, type ApiKeyEntity, type ApiKeyRole } from '@libs/persistence';
import { DomainError } from '@libs/protocol';
import { hashSecret, newSecret, secretPrefix } from './secrets';
import { VerifiedKeys } from './verified-keys';

export interface ApiKeyView {
  id: string;
  name: string;
  role: ApiKeyRole;
  /**
   * The first characters of a key the host generated (`rhk_…`, 256 random bits, so a prefix gives
   * nothing away); null for the operator-chosen ADMIN_API_KEY, of which no part is ever shown.
   */
  key_prefix: string | null;
  /** The workspaces the key acts in (docs/tenancy.md#keys); null: every workspace (admin keys only). */
  workspace_ids: string[] | null;
  created_at: string;
  revoked_at: string | null;
}

export interface Principal {
  key_id: string;
  role: ApiKeyRole;
  /** The workspaces the caller may see and act in (docs/tenancy.md#keys); null: every workspace. */
  workspaces: readonly string[] | null;
}

const ENV_ADMIN_KEY_ID = 'env-admin';
const AUTH_CACHE_MS = 10_000;
/** Verified keys remembered per process (docs/security.md#credential-caches): the longest held out first. */
export const VERIFIED_KEYS_CAPACITY = 1024;
export const ADMIN_KEY_FILE = 'admin-api-key';

/** The row of ADMIN_API_KEY (ids `env-admin`, `env-admin-<ms>` after a change of the variable). */
function isEnvAdminKey(k: ApiKeyEntity): boolean {
  return k.id === ENV_ADMIN_KEY_ID || k.id.startsWith(`${ENV_ADMIN_KEY_ID}-`);
}

function view(k: ApiKeyEntity): ApiKeyView {
  return {
    id: k.id,
    name: k.name,
    role: k.role,
    key_prefix: isEnvAdminKey(k) ? null : k.key_prefix,
    workspace_ids: k.workspace_ids,
    created_at: new Date(k.created_at).toISOString(),
    revoked_at: k.revoked_at === null ? null : new Date(k.revoked_at).toISOString(),
  };
}

/** Whether a key of `workspaces` lies within `scope` (null scope: everything; a global key only in it). */
function within(workspaces: readonly string[] | null, scope: readonly string[] | null): boolean {
  return scope === null || (workspaces !== null && workspaces.every((w) => scope.includes(w)));
}

@Injectable()
export class ApiKeysService implements OnApplicationBootstrap {
  private readonly logger = new Logger(ApiKeysService.name);
  /** Keys verified in the last AUTH_CACHE_MS, by the presented secret (no SHA-256 per request). */
  private readonly verified = new VerifiedKeys<Principal>(VERIFIED_KEYS_CAPACITY, AUTH_CACHE_MS);
  /** Key ids seen active (stream tokens), until when: the same AUTH_CACHE_MS as keys. */
  private readonly active = new Map<string, number>();
  /** Told the id of every key revoked in this process (open event streams end with their key). */
  private readonly revokedListeners = new Set<(keyId: string) => void>();

  constructor(
    private readonly keys: ApiKeysRepository,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  /** Makes sure an admin can get in: ADMIN_API_KEY, or a generated key printed once and saved 0600. */
  async onApplicationBootstrap(): Promise<void> {
    if (this.config.adminApiKey) {
      await this.ensureEnvAdminKey(hashSecret(this.config.adminApiKey));
      return;
    }
    if ((await this.keys.countActive('admin')) > 0) {
      return;
    }
    const created = await this.create('bootstrap admin', 'admin', null);
    const file = path.join(this.config.dataDir, ADMIN_KEY_FILE);
    fs.mkdirSync(this.config.dataDir, { recursive: true });
    fs.writeFileSync(file, `${created.key}\n`, { mode: 0o600 });
    fs.chmodSync(file, 0o600);
    // Printed once, on purpose: this is the quick-start credential.
    process.stdout.write(`\nAdmin API key (shown once, also saved to ${file}):\n  ${created.key}\n\n`);
    this.logger.log(`created the first admin API key ${created.id}; saved to ${file}`);
  }

  /**
   * ADMIN_API_KEY as a stored key (docs/api.md#keys): created once, replaced (the previous one
   * revoked) when the variable changed. Several processes on one database boot at once with the
   * same key (docs/deployment.md): the unique key hash makes one insert win, and the others find
   * the key active and are done.
   */
  private async ensureEnvAdminKey(hash: string): Promise<void> {
    const existing = await this.keys.get(ENV_ADMIN_KEY_ID);
    if (existing && existing.key_hash === hash && existing.revoked_at === null) {
      return;
    }
    if (existing && (await this.keys.findActiveByHash(hash))) {
      return; // another process already replaced it with this key
    }
    if (existing) {
      await this.keys.revoke(ENV_ADMIN_KEY_ID, Date.now());
      this.forget(ENV_ADMIN_KEY_ID);
    }
    try {
      await this.keys.create({
        id: existing ? `${ENV_ADMIN_KEY_ID}-${Date.now()}` : ENV_ADMIN_KEY_ID,
        name: 'ADMIN_API_KEY',
        role: 'admin',
        key_hash: hash,
        // No part of a secret the host did not generate is stored or listed (it may be weak or reused).
        key_prefix: '',
        // The operator's key is global: a single-tenant install notices nothing (docs/tenancy.md#keys).
        workspace_ids: null,
        created_at: Date.now(),
        revoked_at: null,
      });
    } catch (e) {
      // A process booting at the same moment inserted it first (the id or the hash exists).
      if (await this.keys.findActiveByHash(hash)) {
        return;
      }
      throw e;
    }
  }

  /**
   * A new key of `role` for `workspaceIds` (docs/tenancy.md#keys): a platform key needs at least one
   * workspace; an admin key null (global) or a list. Workspaces are checked by the caller.
   */
  async create(name: string, role: ApiKeyRole, workspaceIds: string[] | null): Promise<ApiKeyView & { key: string }> {
    if (role === 'platform' && (workspaceIds === null || workspaceIds.length === 0)) {
      throw new DomainError('invalid_argument', 'workspace_ids: a platform key belongs to one or more workspaces', {
        field: 'workspace_ids',
      });
    }
    const key = newSecret('rhk');
    const row = await this.keys.create({
      id: randomUUID(),
      name,
      role,
      key_hash: hashSecret(key),
      key_prefix: secretPrefix(key),
      workspace_ids: workspaceIds === null ? null : [...new Set(workspaceIds)],
      created_at: Date.now(),
      revoked_at: null,
    });
    return { ...view(row), key };
  }

  /** The keys a caller may see: a workspace-scoped caller, only keys within its workspaces. */
  async list(scope: readonly string[] | null = null): Promise<ApiKeyView[]> {
    return (await this.keys.list()).filter((k) => within(k.workspace_ids, scope)).map(view);
  }

  async revoke(id: string, by: Principal): Promise<void> {
    const key = await this.keys.get(id);
    if (!key || !within(key.workspace_ids, by.workspaces)) {
      throw new DomainError('not_found', `API key ${id} not found`, { id });
    }
    if (key.id === by.key_id) {
      throw new DomainError('conflict', 'an API key cannot revoke itself', { id });
    }
    if (!(await this.keys.revoke(id, Date.now()))) {
      throw new DomainError('conflict', `API key ${id} is already revoked`, { id });
    }
    this.forget(id);
    for (const listener of this.revokedListeners) {
      listener(id);
    }
  }

  /**
   * Every change to a key goes through here (today: revocation, by `revoke` and by a changed
   * ADMIN_API_KEY; keys have no other update): the caches drop it, lookups in flight store nothing.
   */
  private forget(id: string): void {
    this.verified.forgetKey(id);
    this.active.delete(id);
  }

  /**
   * The stored hash of a key's secret (revoked or not: the caller checks that), null when there is
   * no such key: the StreamTokenKeys of stream tokens (auth.module.ts).
   */
  async keyHash(keyId: string): Promise<string | null> {
    return (await this.keys.get(keyId))?.key_hash ?? null;
  }

  /** Calls `listener` with the id of each key revoked in this process; answers the unsubscribe. */
  onRevoked(listener: (keyId: string) => void): () => void {
    this.revokedListeners.add(listener);
    return () => this.revokedListeners.delete(listener);
  }

  /**
   * Whether the key exists and is not revoked (stream tokens end with the key that minted them);
   * cached like authenticate(), so a revocation takes effect at once here, within AUTH_CACHE_MS elsewhere.
   */
  async isActive(keyId: string): Promise<boolean> {
    if ((this.active.get(keyId) ?? 0) > Date.now()) {
      return true;
    }
    const active = (await this.keys.get(keyId))?.revoked_at === null;
    if (active) {
      this.active.set(keyId, Date.now() + AUTH_CACHE_MS);
    } else {
      this.active.delete(keyId);
    }
    return active;
  }

  /**
   * The key's principal, or null. Valid keys are remembered for AUTH_CACHE_MS by the presented
   * secret (a revocation takes effect at once in this process, and within that time in others);
   * refusals are not remembered.
   */
  async authenticate(token: string): Promise<Principal | null> {
    const known = this.verified.get(token, Date.now());
    if (known !== undefined) {
      return known;
    }
    const generation = this.verified.generation;
    const key = await this.keys.findActiveByHash(hashSecret(token));
    if (generation !== this.verified.generation) {
      // A key was revoked meanwhile: read again rather than trust (or remember) the old row.
      return this.authenticate(token);
    }
    if (!key) {
      return null;
    }
    const workspaces = key.workspace_ids === null ? null : Object.freeze([...key.workspace_ids]);
    const principal: Principal = Object.freeze({ key_id: key.id, role: key.role, workspaces });
    this.verified.remember(token, key.id, principal, generation, Date.now());
    return principal;
  }
}
