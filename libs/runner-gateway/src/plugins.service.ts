import { Injectable } from '@nestjs/common';
import { hashSecret, newSecret, secretPrefix } from '@libs/auth';
import { PluginsRepository, type PluginEntity } from '@libs/persistence';
import { DomainError, isValidSegment, pluginIdOf } from '@libs/protocol';
import { RunnerConnections } from './runner-connections';

export interface PluginView {
  plugin_id: string;
  author: string;
  name: string;
  token_prefix: string;
  created_at: string;
  token_issued_at: string;
}

export function pluginView(p: PluginEntity): PluginView {
  return {
    plugin_id: p.plugin_id,
    author: p.author,
    name: p.name,
    token_prefix: p.token_prefix,
    created_at: new Date(p.created_at).toISOString(),
    token_issued_at: new Date(p.token_issued_at).toISOString(),
  };
}

const AUTH_CACHE_MS = 10_000;

/** Plugin registrations and their connection tokens (shown once, stored hashed). */
@Injectable()
export class PluginsService {
  /** token hash → plugin, for host API calls; dropped on rotation and removal. */
  private readonly authCache = new Map<string, { plugin: PluginEntity; until: number }>();
  /**
   * Bumped on every rotation and removal: a lookup that started before one may have read the old
   * token's row and must not put it back into the cache.
   */
  private revocations = 0;
  /** Per plugin: how many times its token was revoked (rotation, removal) in this process. */
  private readonly revisions = new Map<string, number>();

  constructor(
    private readonly plugins: PluginsRepository,
    private readonly connections: RunnerConnections,
  ) {}

  async register(author: string, name: string): Promise<PluginView & { token: string }> {
    for (const [field, value] of [
      ['author', author],
      ['name', name],
    ] as const) {
      if (!isValidSegment(value)) {
        throw new DomainError('invalid_argument', `${field} must be 1-64 letters, digits, ".", "_" or "-"`, { field });
      }
    }
    const pluginId = pluginIdOf(author, name);
    if (await this.plugins.get(pluginId)) {
      throw new DomainError('conflict', `plugin ${pluginId} is already registered`, { plugin_id: pluginId });
    }
    const token = newSecret('rhp');
    const now = Date.now();
    const row = await this.plugins
      .create({
        plugin_id: pluginId,
        author,
        name,
        token_hash: hashSecret(token),
        token_prefix: secretPrefix(token),
        created_at: now,
        token_issued_at: now,
      })
      .catch(async (e: unknown) => {
        // A concurrent registration of the same plugin won the insert.
        if (await this.plugins.get(pluginId)) {
          throw new DomainError('conflict', `plugin ${pluginId} is already registered`, { plugin_id: pluginId });
        }
        throw e;
      });
    return { ...pluginView(row), token };
  }

  /**
   * Issues a new token; the old one stops working at once, and the live Connect session opened
   * with it is closed (its runs fail `runner.disconnected`), so the plugin reconnects with the new one.
   */
  async rotateToken(pluginId: string): Promise<PluginView & { token: string }> {
    const plugin = await this.get(pluginId);
    const token = newSecret('rhp');
    const now = Date.now();
    await this.plugins.replaceToken(pluginId, hashSecret(token), secretPrefix(token), now);
    this.forget(pluginId);
    this.connections.closePlugin(pluginId, 'the plugin token was rotated');
    return { ...pluginView({ ...plugin, token_prefix: secretPrefix(token), token_issued_at: now }), token };
  }

  async list(): Promise<PluginView[]> {
    return (await this.plugins.list()).map(pluginView);
  }

  async get(pluginId: string): Promise<PluginEntity> {
    const plugin = await this.plugins.get(pluginId);
    if (!plugin) {
      throw new DomainError('not_found', `plugin ${pluginId} not found`, { plugin_id: pluginId });
    }
    return plugin;
  }

  async remove(pluginId: string): Promise<void> {
    if (!(await this.plugins.delete(pluginId))) {
      throw new DomainError('not_found', `plugin ${pluginId} not found`, { plugin_id: pluginId });
    }
    this.forget(pluginId);
    this.connections.closePlugin(pluginId, 'the plugin was deleted');
  }

  async authenticate(token: string): Promise<PluginEntity | null> {
    const hash = hashSecret(token);
    const cached = this.authCache.get(hash);
    if (cached && cached.until > Date.now()) {
      return cached.plugin;
    }
    const revocations = this.revocations;
    const plugin = await this.plugins.findByTokenHash(hash);
    if (revocations !== this.revocations) {
      // A rotation or removal ran meanwhile: read again rather than trust (or cache) the old row.
      return this.authenticate(token);
    }
    if (plugin) {
      this.authCache.set(hash, { plugin, until: Date.now() + AUTH_CACHE_MS });
    } else {
      this.authCache.delete(hash);
    }
    return plugin;
  }

  /**
   * Changes whenever the plugin's token is revoked: a Connect stream authenticated before a
   * rotation must not be welcomed after it (its hello may come later than its token check).
   */
  revisionOf(pluginId: string): number {
    return this.revisions.get(pluginId) ?? 0;
  }

  private forget(pluginId: string): void {
    this.revocations++;
    this.revisions.set(pluginId, this.revisionOf(pluginId) + 1);
    for (const [hash, entry] of this.authCache) {
      if (entry.plugin.plugin_id === pluginId) {
        this.authCache.delete(hash);
      }
    }
  }
}
