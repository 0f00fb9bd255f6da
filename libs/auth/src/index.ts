export * from './secrets';
export { ApiKeysService, ADMIN_KEY_FILE, type ApiKeyView, type Principal } from './api-keys.service';
export { AcceptsStreamToken, ApiKeyGuard, Public, Roles, type AuthenticatedRequest } from './api-key.guard';
export { STREAM_TOKEN_PREFIX, StreamTokensService, type MintedStreamToken } from './stream-tokens';
export { AuthModule } from './auth.module';
export {
  canSee,
  GlobalAdminOnly,
  OWNED_PARAMS,
  OWNER_LOOKUP,
  targetWorkspace,
  type OwnedParam,
  type Owner,
  type OwnerLookup,
} from './tenancy';
