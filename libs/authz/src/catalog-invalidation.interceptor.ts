import {
  Injectable,
  UseInterceptors,
  type CallHandler,
  type ExecutionContext,
  type NestInterceptor,
} from '@nestjs/common';
import { tap, type Observable } from 'rxjs';
import { CatalogVersions } from './catalog-versions';

/**
 * A write (any method but GET) through a controller that manages the catalogue (agents, models,
 * tools, knowledge bases, plugins) sends the catalogue wake-up when its handler has finished and
 * before the answer is sent. The version itself is bumped by the database, in the write's own
 * transaction (CatalogVersions): the wake-up only lets every process drop its caches early.
 * Applied per controller (`@InvalidatesCatalog()`), so no other route — and no gRPC call — pays for it.
 */
@Injectable()
export class CatalogInvalidationInterceptor implements NestInterceptor {
  constructor(private readonly versions: CatalogVersions) {}

  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    if (context.switchToHttp().getRequest<{ method: string }>().method === 'GET') {
      return next.handle();
    }
    const bump = () => this.versions.written();
    return next.handle().pipe(tap({ next: bump, error: bump }));
  }
}

/** Marks a controller whose writes change what admission reads from memory. */
export const InvalidatesCatalog = () => UseInterceptors(CatalogInvalidationInterceptor);
