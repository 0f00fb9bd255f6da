import type { StorageArea } from './snapshot';

/** The workspace every install has; single-tenant installs use only it (docs/tenancy.md). */
const DEFAULT = 'default';

/**
 * Whether a resource of the catalogue is visible to a run of `workspace` (docs/tenancy.md#resources):
 * its own workspace's, or shared. Catalogue entries without a workspace (built-in tools) are the
 * host's own and visible to all.
 */
export function visibleIn(resource: { workspace_id?: string; shared?: boolean }, workspace: string | null): boolean {
  return (
    resource.workspace_id === undefined || resource.shared === true || resource.workspace_id === (workspace ?? DEFAULT)
  );
}

/**
 * The owner each storage area resolves to for a run (docs/tenancy.md#storage): the workspace; the
 * plugin within the workspace (a plugin serving several workspaces keeps them apart; the default
 * workspace keeps the plain plugin id, so storage written before tenancy stays where it was); the
 * agent binding (an agent belongs to one workspace).
 */
export function workspaceOwners(
  workspace: string | null,
  pluginId: string,
  agentId: string,
): Record<StorageArea, string> {
  const ws = workspace ?? DEFAULT;
  return {
    plugin: ws === DEFAULT ? pluginId : `w/${ws}/${pluginId}`,
    workspace: ws,
    binding: agentId,
  };
}
