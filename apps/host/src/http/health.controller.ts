import { Controller, Get, Logger, Res } from '@nestjs/common';
import { ApiOperation, ApiResponse, ApiTags } from '@nestjs/swagger';
import { InjectDataSource } from '@nestjs/typeorm';
import type { FastifyReply } from 'fastify';
import type { DataSource } from 'typeorm';
import { Public } from '@libs/auth';
import { HotStore } from '@libs/persistence';
import { GrpcServerState } from '../grpc-server-state';

@ApiTags('health')
@Public()
@Controller('health')
export class HealthController {
  private readonly logger = new Logger('Health');

  constructor(
    @InjectDataSource() private readonly db: DataSource,
    private readonly grpc: GrpcServerState,
    private readonly hot: HotStore,
  ) {}

  @Get('live')
  @ApiOperation({ summary: 'Liveness: the process answers' })
  @ApiResponse({ status: 200 })
  live(): { status: 'ok' } {
    return { status: 'ok' };
  }

  @Get('ready')
  @ApiOperation({ summary: 'Readiness: database reachable and gRPC server listening' })
  @ApiResponse({ status: 200 })
  @ApiResponse({ status: 503 })
  async ready(@Res({ passthrough: true }) res: FastifyReply) {
    const database = await this.db.query('SELECT 1').then(
      () => 'ok',
      (e: unknown) => {
        // The endpoint is public: the database's own text (host names, users, paths) stays in the log.
        this.logger.error(`readiness: database check failed: ${e instanceof Error ? e.message : String(e)}`);
        return 'unreachable';
      },
    );
    const grpc = this.grpc.listening ? 'ok' : 'not listening';
    const ok = database === 'ok' && grpc === 'ok';
    res.status(ok ? 200 : 503);
    // SQLite: the WAL the checkpoint worker keeps small (a growing one means checkpoints cannot keep up).
    const wal = this.hot.wal();
    return {
      status: ok ? 'ok' : 'unavailable',
      checks: { database, grpc },
      ...(wal
        ? {
            details: {
              wal_bytes: wal.wal_bytes,
              checkpoints: wal.checkpoints,
              last_checkpoint_at: wal.last_checkpoint_at,
            },
          }
        : {}),
    };
  }
}
