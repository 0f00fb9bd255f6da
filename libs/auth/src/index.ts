export * from './secrets';
export { ApiKeysService, ADMIN_KEY_FILE, type ApiKeyView, type Principal } from './api-keys.service';
export { ApiKeyGuard, Public, Roles, type AuthenticatedRequest } from './api-key.guard';
export { AuthModule } from './auth.module';
