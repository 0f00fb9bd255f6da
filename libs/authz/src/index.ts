export * from './snapshot';
export * from './resource-catalog';
export {
  buildSnapshot,
  canonicalJson,
  snapshotHash,
  stateScopeKey,
  stateScopesOf,
  type PolicyInput,
  type SnapshotInput,
  type StateScopes,
} from './snapshot.builder';
export { AuditService, type AuditRecord, type AuditView } from './audit.service';
export { TokenBucket } from './rate-limiter';
export { AuthzModule } from './authz.module';
export { CATALOG_CHANNEL, CatalogVersions } from './catalog-versions';
export { CatalogInvalidationInterceptor, InvalidatesCatalog } from './catalog-invalidation.interceptor';
export {
  WorkspacesService,
  parseQuotas,
  QUOTA_NAMES,
  type WorkspaceInput,
  type WorkspaceQuotas,
  type WorkspaceView,
} from './workspaces.service';
export { visibleIn, workspaceOwners } from './tenancy';
