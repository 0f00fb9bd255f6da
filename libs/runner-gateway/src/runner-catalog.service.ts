import { Injectable } from '@nestjs/common';
import { PluginsRepository } from '@libs/persistence';
import { RunnerDispatch } from './dispatch/runner-dispatch';

export interface RunnerView {
  runner_id: string;
  /** `builtin`: served in process by the host, always connected; `plugin`: over a Connect stream. */
  kind: 'builtin' | 'plugin';
  plugin_id: string;
  name: string;
  state: 'connected' | 'disconnected';
  session_id: string | null;
  connected_at: string | null;
  last_seen_at: string;
  manifest: Record<string, unknown>;
}

/** Runners the host knows: built-in and live ones from their target, others from their last manifest. */
@Injectable()
export class RunnerCatalogService {
  constructor(
    private readonly store: PluginsRepository,
    private readonly dispatch: RunnerDispatch,
  ) {}

  async list(): Promise<RunnerView[]> {
    const views = new Map<string, RunnerView>();
    for (const r of await this.store.listRunners()) {
      views.set(r.runner_id, {
        runner_id: r.runner_id,
        kind: 'plugin',
        plugin_id: r.plugin_id,
        name: r.name,
        state: 'disconnected',
        session_id: null,
        connected_at: null,
        last_seen_at: new Date(r.last_seen_at).toISOString(),
        manifest: r.manifest,
      });
    }
    for (const { kind, session: s, runner: r } of this.dispatch.targets()) {
      views.set(r.runner_id, {
        runner_id: r.runner_id,
        kind,
        plugin_id: s.plugin_id,
        name: r.name,
        state: 'connected',
        session_id: s.session_id,
        connected_at: new Date(s.connected_at).toISOString(),
        last_seen_at: new Date(s.last_seen_at).toISOString(),
        manifest: r.manifest,
      });
    }
    return [...views.values()].sort((a, b) => a.runner_id.localeCompare(b.runner_id));
  }
}
