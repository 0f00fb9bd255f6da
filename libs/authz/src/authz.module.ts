import { Module } from '@nestjs/common';
import { APP_INTERCEPTOR } from '@nestjs/core';
import { AuditService } from './audit.service';
import { CatalogInvalidationInterceptor } from './catalog-invalidation.interceptor';
import { CatalogVersions } from './catalog-versions';

/** The audit log and the catalogue version. (RESOURCE_CATALOG is provided globally by the resources registries.) */
@Module({
  providers: [AuditService, CatalogVersions, { provide: APP_INTERCEPTOR, useClass: CatalogInvalidationInterceptor }],
  exports: [AuditService, CatalogVersions],
})
export class AuthzModule {}
