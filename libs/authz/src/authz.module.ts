import { Module } from '@nestjs/common';
import { AuditService } from './audit.service';
import { CatalogVersions } from './catalog-versions';

/** The audit log and the catalogue version. (RESOURCE_CATALOG is provided globally by the resources registries.) */
@Module({
  providers: [AuditService, CatalogVersions],
  exports: [AuditService, CatalogVersions],
})
export class AuthzModule {}
