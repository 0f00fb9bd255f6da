import { Injectable } from '@nestjs/common';
import { DEFAULT_WORKSPACE, type AgentEntity } from '@libs/persistence';
import { DomainError } from '@libs/protocol';
import { AdmissionCatalog } from './admission-catalog';
import type { EventSubmission } from './event-submission';

/**
 * The edge of admission for tenancy (docs/tenancy.md#runs): the run's workspace comes from the
 * trusted context — the agent's workspace, which the caller's key must reach — never from the
 * event. An event naming another workspace is refused (403 naming `conversation.workspace_id`);
 * a missing one is filled in. All in memory; the workspace's quotas are admission's, after its
 * duplicate check (AdmissionService).
 */
@Injectable()
export class WorkspaceAdmission {
  constructor(private readonly catalog: AdmissionCatalog) {}

  /**
   * The submission with its workspace set, or the refusal; `workspaces` are the caller's (null:
   * all); `since`: the `performance.now()` instant the admission began (AdmissionCatalog). Also the
   * agent as read here, for the admission of the same request (one catalogue-version read for both,
   * docs/scale-out.md#admin-writes).
   */
  async derive(
    sub: EventSubmission,
    workspaces: readonly string[] | null,
    since?: number,
  ): Promise<{ submission: EventSubmission; agent: AgentEntity }> {
    const agent = await this.catalog.agent(sub.agent_id, since).catch((e: unknown) => {
      throw e instanceof DomainError ? new DomainError(e.code, e.message, { ...e.details, field: 'agent_id' }) : e;
    });
    const workspace = agent.workspace_id ?? DEFAULT_WORKSPACE;
    if (workspaces !== null && !workspaces.includes(workspace)) {
      // Another workspace's agent reads like a missing one.
      throw new DomainError('not_found', `agent ${sub.agent_id} not found`, {
        agent_id: sub.agent_id,
        field: 'agent_id',
      });
    }
    const named = sub.conversation?.workspace_id;
    if (named !== undefined && named !== workspace) {
      throw new DomainError(
        'unauthorized',
        `conversation.workspace_id: the run's workspace comes from the API key and the agent; ${JSON.stringify(named)} is not the agent's workspace`,
        { field: 'conversation.workspace_id' },
      );
    }
    const submission = sub.conversation
      ? { ...sub, conversation: { ...sub.conversation, workspace_id: workspace } }
      : sub;
    return { submission, agent };
  }
}
