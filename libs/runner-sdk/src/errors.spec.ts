import { Metadata, status } from '@grpc/grpc-js';
import {
  HOST_ERROR_CODES,
  HostApiError,
  NotFoundError,
  RateLimitedError,
  UnauthorizedError,
  UnavailableError,
  hostApiError,
  hostApiErrorFromGrpc,
} from './errors';

function grpcError(code: status, details: string, trailers: Record<string, string> = {}) {
  const metadata = new Metadata();
  for (const [k, v] of Object.entries(trailers)) {
    metadata.set(k, v);
  }
  return { code, details, metadata, message: `${code} ${details}` };
}

describe('host API errors', () => {
  it('types a refusal by its x-error-code trailer, with retryable and details', () => {
    const e = hostApiErrorFromGrpc(
      'CallTool',
      grpcError(status.PERMISSION_DENIED, 'tool x is not authorized for operation call for this agent run', {
        'x-error-code': 'unauthorized',
        'x-error-retryable': 'false',
        'x-error-details': '{"tool":"x"}',
      }),
    );
    expect(e).toBeInstanceOf(UnauthorizedError);
    expect(e).toBeInstanceOf(HostApiError);
    expect(e).toMatchObject({
      name: 'UnauthorizedError',
      code: 'unauthorized',
      retryable: false,
      details: { tool: 'x' },
      method: 'CallTool',
      grpcStatus: status.PERMISSION_DENIED,
    });
    expect(e.message).toBe('CallTool: unauthorized: tool x is not authorized for operation call for this agent run');
  });

  it('rate_limited and payload_too_large share RESOURCE_EXHAUSTED: the trailer decides', () => {
    const limited = hostApiErrorFromGrpc(
      'InvokeModel',
      grpcError(status.RESOURCE_EXHAUSTED, 'slow down', {
        'x-error-code': 'rate_limited',
        'x-error-retryable': 'true',
      }),
    );
    expect(limited).toBeInstanceOf(RateLimitedError);
    expect(limited.retryable).toBe(true);
    const big = hostApiErrorFromGrpc(
      'CallTool',
      grpcError(status.RESOURCE_EXHAUSTED, 'too big', { 'x-error-code': 'payload_too_large' }),
    );
    expect(big.code).toBe('payload_too_large');
    expect(big.retryable).toBe(false);
  });

  it('without a trailer (a proxy, a dropped connection) the gRPC status decides', () => {
    expect(hostApiErrorFromGrpc('RunGet', grpcError(status.UNAVAILABLE, 'No connection established'))).toMatchObject({
      code: 'unavailable',
      retryable: true,
    });
    expect(hostApiErrorFromGrpc('RunGet', grpcError(status.NOT_FOUND, 'gone'))).toBeInstanceOf(NotFoundError);
    expect(hostApiErrorFromGrpc('RunGet', grpcError(status.UNKNOWN, 'huh')).code).toBe('runtime_error');
    // An unknown code in the trailer is not trusted either.
    expect(
      hostApiErrorFromGrpc('RunGet', grpcError(status.UNAVAILABLE, 'x', { 'x-error-code': 'teapot' })),
    ).toBeInstanceOf(UnavailableError);
    // Details that are not JSON are kept raw.
    expect(
      hostApiErrorFromGrpc('RunGet', grpcError(status.INTERNAL, 'x', { 'x-error-details': '{oops' })).details,
    ).toEqual({
      raw: '{oops',
    });
  });

  it('has one class per host code, each with the default retryable rule', () => {
    for (const code of HOST_ERROR_CODES) {
      const e = hostApiError(code, 'm');
      expect(e.code).toBe(code);
      expect(e.constructor).not.toBe(HostApiError);
      expect(e.retryable).toBe(['unavailable', 'rate_limited', 'deadline_exceeded'].includes(code));
    }
  });
});
