import { Module } from '@nestjs/common';
import { AuditService } from './audit.service';

/** The audit log. (RESOURCE_CATALOG is provided globally by the resources registries.) */
@Module({
  providers: [AuditService],
  exports: [AuditService],
})
export class AuthzModule {}
