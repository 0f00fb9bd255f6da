import { Module } from '@nestjs/common';
import { ClusterModule } from '@libs/cluster';
import { AuditService } from './audit.service';
import { CatalogVersions } from './catalog-versions';
import { WorkspacesService } from './workspaces.service';

/** The audit log and the catalogue version. (RESOURCE_CATALOG is provided globally by the resources registries.) */
@Module({
  imports: [ClusterModule],
  providers: [AuditService, CatalogVersions, WorkspacesService],
  exports: [AuditService, CatalogVersions, WorkspacesService],
})
export class AuthzModule {}
