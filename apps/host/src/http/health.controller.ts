import { Controller, Get, Inject, Logger, Res } from '@nestjs/common';
import { ApiOperation, ApiProperty, ApiPropertyOptional, ApiResponse, ApiTags } from '@nestjs/swagger';
import { InjectDataSource } from '@nestjs/typeorm';
import type { FastifyReply } from 'fastify';
import type { DataSource } from 'typeorm';
import { Public } from '@libs/auth';
import { ProcessRegistry } from '@libs/cluster';
import { HotStore } from '@libs/persistence';
import { GrpcServerState } from '../grpc-server-state';

class LivenessDto {
  @ApiProperty({ enum: ['ok'] }) status!: 'ok';
}

class ReadinessChecksDto {
  @ApiProperty({ enum: ['ok', 'unreachable'] }) database!: string;
  @ApiProperty({ enum: ['ok', 'not listening'] }) grpc!: string;
  @ApiProperty({
    enum: ['ok', 'draining'],
    description: 'draining: the process is shutting down and admits nothing new (docs/deployment.md)',
  })
  process!: string;
}

class WalDetailsDto {
  @ApiProperty({ description: 'Size of the SQLite write-ahead log' }) wal_bytes!: number;
  @ApiProperty() checkpoints!: number;
  @ApiProperty({ nullable: true, type: Number, description: 'Epoch milliseconds' }) last_checkpoint_at!: number | null;
}

class ReadinessDto {
  @ApiProperty({ enum: ['ok', 'unavailable'] }) status!: string;
  @ApiProperty({ type: ReadinessChecksDto }) checks!: ReadinessChecksDto;
  @ApiPropertyOptional({ type: WalDetailsDto, description: 'SQLite only' }) details?: WalDetailsDto;
}

/** The probes need no key: `security: []` in the document. */
const PUBLIC_OPERATION = { security: [] };

@ApiTags('health')
@Public()
@Controller('health')
export class HealthController {
  private readonly logger = new Logger('Health');

  constructor(
    @InjectDataSource() private readonly db: DataSource,
    private readonly grpc: GrpcServerState,
    private readonly hot: HotStore,
    @Inject(ProcessRegistry) private readonly process: { readonly draining: boolean },
  ) {}

  @Get('live')
  @ApiOperation({ summary: 'Liveness: the process answers', ...PUBLIC_OPERATION })
  @ApiResponse({ status: 200, type: LivenessDto, description: 'Alive' })
  live(): { status: 'ok' } {
    return { status: 'ok' };
  }

  @Get('ready')
  @ApiOperation({ summary: 'Readiness: database reachable and gRPC server listening', ...PUBLIC_OPERATION })
  @ApiResponse({ status: 200, type: ReadinessDto, description: 'Ready' })
  @ApiResponse({ status: 503, type: ReadinessDto, description: 'Not ready: `checks` says what is not' })
  async ready(@Res({ passthrough: true }) res: FastifyReply): Promise<ReadinessDto> {
    const database = await this.db.query('SELECT 1').then(
      () => 'ok',
      (e: unknown) => {
        // The endpoint is public: the database's own text (host names, users, paths) stays in the log.
        this.logger.error(`readiness: database check failed: ${e instanceof Error ? e.message : String(e)}`);
        return 'unreachable';
      },
    );
    const grpc = this.grpc.listening ? 'ok' : 'not listening';
    const process = this.process.draining ? 'draining' : 'ok';
    const ok = database === 'ok' && grpc === 'ok' && process === 'ok';
    res.status(ok ? 200 : 503);
    // SQLite: the WAL the checkpoint worker keeps small (a growing one means checkpoints cannot keep up).
    const wal = this.hot.wal();
    return {
      status: ok ? 'ok' : 'unavailable',
      checks: { database, grpc, process },
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
