import { Module } from '@nestjs/common';
import { AuditService } from './audit.service';
import { NoResourcesCatalog, RESOURCE_CATALOG } from './resource-catalog';

@Module({
  providers: [AuditService, { provide: RESOURCE_CATALOG, useClass: NoResourcesCatalog }],
  exports: [AuditService, RESOURCE_CATALOG],
})
export class AuthzModule {}
