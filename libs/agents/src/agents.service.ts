import { Inject, Injectable } from '@nestjs/common';
import { RESOURCE_CATALOG, visibleIn, type ResourceCatalog } from '@libs/authz';
import { APP_CONFIG, type AppConfig } from '@libs/config';
import type { z } from 'zod';
import { AgentsRepository, PluginsRepository, type AgentEntity, type JsonObject } from '@libs/persistence';
import {
  DomainError,
  zodRefusal,
  parseRunnerId,
  validateRunnerConfig,
  runnerManifestSchema,
  type RunnerManifest,
  readPage,
} from '@libs/protocol';
import { RunnerDispatch } from '@libs/runner-gateway';
import {
  concurrencyPolicySchema,
  deliveryPolicySchema,
  resourcePolicySchema,
  statePolicySchema,
  type DeliveryPolicy,
  type ResourcePolicy,
} from './policies';

export interface AgentInput {
  runner_id: string;
  description?: string;
  runner_config?: Record<string, unknown>;
  resource_policy?: Record<string, unknown>;
  state_policy?: Record<string, unknown>;
  delivery_policy?: Record<string, unknown>;
  concurrency_policy?: Record<string, unknown>;
}

export interface AgentView {
  agent_id: string;
  /** The owning workspace (docs/tenancy.md); fixed at creation. */
  workspace_id: string;
  runner_id: string;
  description: string;
  runner_config: Record<string, unknown>;
  resource_policy: Record<string, unknown>;
  state_policy: Record<string, unknown>;
  delivery_policy: Record<string, unknown>;
  concurrency_policy: Record<string, unknown>;
  version: number;
  created_at: string;
  updated_at: string;
}

export const AGENT_ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/;

export function agentView(a: AgentEntity): AgentView {
  return {
    agent_id: a.agent_id,
    workspace_id: a.workspace_id,
    runner_id: a.runner_id,
    description: a.description,
    runner_config: a.runner_config,
    resource_policy: a.resource_policy,
    state_policy: a.state_policy,
    delivery_policy: a.delivery_policy,
    concurrency_policy: a.concurrency_policy,
    version: a.version,
    created_at: new Date(a.created_at).toISOString(),
    updated_at: new Date(a.updated_at).toISOString(),
  };
}

function parsePolicy<T extends z.ZodType>(schema: T, value: unknown, field: string): JsonObject {
  const r = schema.safeParse(value ?? {});
  if (!r.success) {
    throw zodRefusal(r.error, field);
  }
  return r.data as JsonObject;
}

/** Agents: bindings of a runner to its config and policies (docs/api.md#agents). */
@Injectable()
export class AgentsService {
  constructor(
    private readonly agents: AgentsRepository,
    private readonly runnerStore: PluginsRepository,
    private readonly dispatch: RunnerDispatch,
    @Inject(RESOURCE_CATALOG) private readonly catalog: ResourceCatalog,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  async create(agentId: string, input: AgentInput, workspaceId = 'default'): Promise<AgentView> {
    if (!AGENT_ID_PATTERN.test(agentId)) {
      throw new DomainError('invalid_argument', 'agent_id must be 1-128 letters, digits, ".", "_", ":" or "-"', {
        field: 'agent_id',
      });
    }
    if (await this.agents.get(agentId)) {
      throw new DomainError('conflict', `agent ${agentId} already exists`, { agent_id: agentId });
    }
    const now = Date.now();
    const entity = {
      agent_id: agentId,
      workspace_id: workspaceId,
      ...(await this.validated(input, workspaceId)),
      version: 1,
      created_at: now,
      updated_at: now,
    };
    await this.agents.insert(entity);
    return agentView(entity);
  }

  async replace(agentId: string, input: AgentInput, expectedVersion?: number): Promise<AgentView> {
    const current = await this.getEntity(agentId);
    if (expectedVersion !== undefined && expectedVersion !== current.version) {
      throw new DomainError('conflict', `agent ${agentId} is at version ${current.version}, not ${expectedVersion}`, {
        agent_id: agentId,
        version: current.version,
      });
    }
    const next = {
      ...current,
      ...(await this.validated(input, current.workspace_id)),
      version: current.version + 1,
      updated_at: Date.now(),
    };
    if (!(await this.agents.update(next, current.version))) {
      throw new DomainError('conflict', `agent ${agentId} changed concurrently; read it again`, { agent_id: agentId });
    }
    return agentView(next);
  }

  async get(agentId: string): Promise<AgentView> {
    return agentView(await this.getEntity(agentId));
  }

  async getEntity(agentId: string): Promise<AgentEntity> {
    const agent = await this.agents.get(agentId);
    if (!agent) {
      throw new DomainError('not_found', `agent ${agentId} not found`, { agent_id: agentId });
    }
    return agent;
  }

  /** Agents of `scope` (null: every workspace), by id. */
  async page(
    after: string | null,
    limit: number,
    scope: readonly string[] | null = null,
  ): Promise<{ items: AgentView[]; next_cursor: string | null }> {
    const { rows, next_cursor } = await readPage(
      limit,
      (n) => this.agents.page(after, n, scope),
      (a) => a.agent_id,
    );
    return { items: rows.map(agentView), next_cursor };
  }

  async remove(agentId: string): Promise<void> {
    if (!(await this.agents.delete(agentId))) {
      throw new DomainError('not_found', `agent ${agentId} not found`, { agent_id: agentId });
    }
  }

  /** The manifest of a runner: from its live connection, else the last one it announced. */
  async manifestOf(runnerId: string): Promise<RunnerManifest | null> {
    const live = this.dispatch.target(runnerId);
    if (live) {
      return live.runner.manifest;
    }
    const stored = await this.runnerStore.getRunner(runnerId);
    if (!stored) {
      return null;
    }
    // Stored when it was accepted; one that no longer parses (an older protocol) counts as unknown
    // until the runner connects again and announces a current one.
    const parsed = runnerManifestSchema.safeParse(stored.manifest);
    return parsed.success ? parsed.data : null;
  }

  private async validated(input: AgentInput, workspaceId: string) {
    parseRunnerId(input.runner_id);
    const runnerConfig = (input.runner_config ?? {}) as JsonObject;
    // Checked against the runner's config_schema when the runner is known; `timeout` always.
    const manifest = await this.manifestOf(input.runner_id);
    const problems = validateRunnerConfig(runnerConfig, manifest?.config_schema ?? []);
    if (problems.length > 0) {
      // Each problem reads "runner_config.<key>: <rule>": the first one names the field.
      const field = problems[0].slice(0, problems[0].indexOf(':'));
      throw new DomainError('invalid_argument', problems.join('; '), { field, problems });
    }
    const resourcePolicy = parsePolicy(
      resourcePolicySchema,
      input.resource_policy,
      'resource_policy',
    ) as ResourcePolicy;
    await this.checkResources(resourcePolicy, workspaceId);
    return {
      runner_id: input.runner_id,
      description: input.description ?? '',
      runner_config: runnerConfig,
      resource_policy: resourcePolicy as JsonObject,
      state_policy: parsePolicy(statePolicySchema, input.state_policy, 'state_policy'),
      delivery_policy: this.deliveryPolicy(input.delivery_policy),
      concurrency_policy: parsePolicy(concurrencyPolicySchema, input.concurrency_policy, 'concurrency_policy'),
    };
  }

  /** The delivery policy; its webhook secret is an env reference held to SECRET_ENV_ALLOWLIST. */
  private deliveryPolicy(value: unknown): JsonObject {
    const policy = parsePolicy(deliveryPolicySchema, value, 'delivery_policy') as DeliveryPolicy & JsonObject;
    const name = policy.webhook?.secret_env;
    if (name !== undefined && !this.config.secretEnv.allows(name)) {
      const field = 'delivery_policy.webhook.secret_env';
      throw new DomainError(
        'invalid_argument',
        `${field}: ${name} is not a host variable a webhook may use: it must match SECRET_ENV_ALLOWLIST ` +
          `(${this.config.secretEnv.entries.join(', ') || 'empty'}), and the host's own secrets are never allowed`,
        { field },
      );
    }
    return policy;
  }

  /**
   * Every resource a policy names must be registered and visible in the agent's workspace
   * (docs/api.md#agents, docs/tenancy.md#resources).
   */
  private async checkResources(policy: ResourcePolicy, workspaceId: string): Promise<void> {
    const visible = <T extends { workspace_id?: string; shared?: boolean }>(xs: T[]) =>
      xs.filter((x) => visibleIn(x, workspaceId));
    const [models, tools, kbs] = await Promise.all([
      this.catalog.models().then(visible),
      this.catalog.tools().then(visible),
      this.catalog.knowledgeBases().then(visible),
    ]);
    const lists: [string, string, string[] | undefined, Set<string>][] = [
      ['allowed_model_ids', 'model', policy.allowed_model_ids, new Set(models.map((m) => m.model_id))],
      ['allowed_tool_names', 'tool', policy.allowed_tool_names, new Set(tools.map((t) => t.tool_name))],
      ['allowed_kb_ids', 'knowledge base', policy.allowed_kb_ids, new Set(kbs.map((k) => k.kb_id))],
    ];
    for (const [field, what, ids, known] of lists) {
      const index = (ids ?? []).findIndex((id) => !known.has(id));
      if (index >= 0) {
        const path = `resource_policy.${field}[${index}]`;
        throw new DomainError('invalid_argument', `${path}: ${what} "${ids![index]}" is not registered`, {
          field: path,
        });
      }
    }
  }
}
