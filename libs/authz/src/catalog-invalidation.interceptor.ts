import { Injectable, type CallHandler, type ExecutionContext, type NestInterceptor } from '@nestjs/common';
import { tap, type Observable } from 'rxjs';
import { CatalogVersions } from './catalog-versions';

/**
 * Every admin write (agents, models, tools, knowledge bases, plugins) bumps the catalogue
 * version when its handler has finished and before the answer is sent: the next admission
 * reads the new state. Reads and non-admin routes pass straight through.
 */
@Injectable()
export class CatalogInvalidationInterceptor implements NestInterceptor {
  constructor(private readonly versions: CatalogVersions) {}

  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    if (context.getType() !== 'http') {
      return next.handle();
    }
    const req = context.switchToHttp().getRequest<{ method: string; url: string }>();
    if (req.method === 'GET' || !req.url.startsWith('/v1/admin/')) {
      return next.handle();
    }
    const bump = () => this.versions.bump();
    return next.handle().pipe(tap({ next: bump, error: bump }));
  }
}
