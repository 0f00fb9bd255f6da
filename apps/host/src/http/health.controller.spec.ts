import { Logger } from '@nestjs/common';
import type { FastifyReply } from 'fastify';
import type { DataSource } from 'typeorm';
import type { HotStore } from '@libs/persistence';
import { GrpcServerState } from '../grpc-server-state';
import { HealthController } from './health.controller';

/** The readiness answer is public: a failing database check must not carry the driver's text. */
describe('HealthController.ready', () => {
  const DRIVER_TEXT = 'password authentication failed for user "runner" at db.internal:5432 (/var/lib/secret)';

  const answer = async (query: () => Promise<unknown>, wal: ReturnType<HotStore['wal']> = null, draining = false) => {
    const grpc = new GrpcServerState();
    grpc.listening = true;
    let status = 0;
    const res = { status: (s: number) => (status = s) } as unknown as FastifyReply;
    const hot = { wal: () => wal } as unknown as HotStore;
    const body = await new HealthController({ query } as unknown as DataSource, grpc, hot, { draining }).ready(res);
    return { status, body };
  };

  it('says ok when the database answers', async () => {
    expect(await answer(() => Promise.resolve([{ 1: 1 }]))).toEqual({
      status: 200,
      body: { status: 'ok', checks: { database: 'ok', grpc: 'ok', process: 'ok' } },
    });
  });

  it('fails while the process drains (a load balancer stops routing to it)', async () => {
    expect(await answer(() => Promise.resolve([{ 1: 1 }]), null, true)).toEqual({
      status: 503,
      body: { status: 'unavailable', checks: { database: 'ok', grpc: 'ok', process: 'draining' } },
    });
  });

  it('shows the SQLite WAL size the checkpoint worker last saw', async () => {
    const wal = { wal_bytes: 4096, checkpoints: 3, last_checkpoint_at: 1_700_000_000_000, checkpoint_error: null };
    expect((await answer(() => Promise.resolve([]), wal)).body).toMatchObject({
      status: 'ok',
      details: { wal_bytes: 4096, checkpoints: 3, last_checkpoint_at: 1_700_000_000_000 },
    });
  });

  it('says "unreachable" without the error text, which goes to the log only', async () => {
    const logged = jest.spyOn(Logger.prototype, 'error').mockImplementation(() => undefined);
    try {
      const r = await answer(() => Promise.reject(new Error(DRIVER_TEXT)));
      expect(r).toEqual({
        status: 503,
        body: { status: 'unavailable', checks: { database: 'unreachable', grpc: 'ok', process: 'ok' } },
      });
      expect(JSON.stringify(r)).not.toContain('password');
      expect(logged).toHaveBeenCalledWith(expect.stringContaining(DRIVER_TEXT));
    } finally {
      logged.mockRestore();
    }
  });
});
