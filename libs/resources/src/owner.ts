/** The owning workspace of a resource and whether every workspace's runs see it (docs/tenancy.md#resources). */
export interface Owner {
  workspace_id: string;
  shared: boolean;
}

export const DEFAULT_OWNER: Owner = { workspace_id: 'default', shared: false };
