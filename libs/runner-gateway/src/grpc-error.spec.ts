import { status } from '@grpc/grpc-js';
import { DomainError } from '@libs/protocol';
import { GrpcStatusError, grpcStatusErrorOf } from './grpc-error';

describe('grpcStatusErrorOf', () => {
  const logged: object[] = [];
  const logger = { error: (line: object) => void logged.push(line) };

  beforeEach(() => {
    logged.length = 0;
  });

  it('maps a protocol error to its status, message and x-error-* trailers', () => {
    const e = grpcStatusErrorOf(new DomainError('not_found', 'run r1 is not active', { run_id: 'r1' }), logger);
    expect(e.code).toBe(status.NOT_FOUND);
    expect(e.details).toBe('run r1 is not active');
    expect(e.metadata.get('x-error-code')).toEqual(['not_found']);
    expect(e.metadata.get('x-error-retryable')).toEqual(['false']);
    expect(e.metadata.get('x-error-details')).toEqual(['{"run_id":"r1"}']);
    expect(logged).toEqual([]);
  });

  it('passes a finished gRPC status through as it is', () => {
    const given = GrpcStatusError.unimplemented('not served');
    expect(grpcStatusErrorOf(given, logger)).toBe(given);
  });

  it('turns any other error into runtime_error / INTERNAL naming only an error id, and logs the error', () => {
    const e = grpcStatusErrorOf(new TypeError('secret internals'), logger);
    expect(e.code).toBe(status.INTERNAL);
    expect(e.details).toMatch(/^internal error \(error id [0-9a-f-]{36}\)$/);
    expect(e.details).not.toContain('secret');
    expect(e.metadata.get('x-error-code')).toEqual(['runtime_error']);
    expect(logged).toHaveLength(1);
    const [line] = logged as { error_id: string; msg: string }[];
    expect(e.details).toContain(line.error_id);
    expect(line.msg).toContain('secret internals');
  });
});
