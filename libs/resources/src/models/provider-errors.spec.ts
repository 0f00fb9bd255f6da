import * as net from 'node:net';
import {
  ScriptedOpenAIServer,
  UNIT_KEY as KEY,
  chatModel,
  collect,
  failure,
  invokeRequest as req,
  modelsFixture,
  runCall,
  scripts,
  type Script,
} from '@libs/testing';
import { redact } from './provider-errors';
import { encodingFor } from './tokenizer';

async function closedPort(): Promise<number> {
  const srv = net.createServer();
  await new Promise<void>((resolve) => srv.listen(0, '127.0.0.1', () => resolve()));
  const port = (srv.address() as net.AddressInfo).port;
  await new Promise<void>((resolve) => srv.close(() => resolve()));
  return port;
}

describe('provider errors → protocol errors (real SDK, real HTTP)', () => {
  // A registered model warms its encoder on a later tick; build it first so none runs after teardown.
  beforeAll(() => encodingFor('o200k_base'));

  let server: ScriptedOpenAIServer;
  let f: ReturnType<typeof modelsFixture>;

  beforeAll(async () => {
    server = await ScriptedOpenAIServer.start();
  });
  afterAll(() => server.close());
  beforeEach(async () => {
    server.reset();
    f = modelsFixture();
    await f.registry.create('m', chatModel(server.baseUrl));
  });

  const cases: [string, Script, Record<string, unknown>][] = [
    [
      '400 context_length_exceeded',
      scripts.contextLengthExceeded(),
      { code: 'invalid_argument', retryable: false, details: { reason: 'context_length_exceeded', status: 400 } },
    ],
    [
      '400 other',
      scripts.badRequest(),
      { code: 'invalid_argument', retryable: false, details: { reason: 'provider_rejected', status: 400 } },
    ],
    [
      '429',
      scripts.rateLimited(2),
      { code: 'rate_limited', retryable: true, details: { reason: 'provider_rate_limited', retry_after_ms: 2000 } },
    ],
    ['429 insufficient_quota', scripts.quotaExceeded(), { code: 'rate_limited', retryable: false }],
    ['500', scripts.serverError(500), { code: 'unavailable', retryable: true, details: { status: 500 } }],
    ['503', scripts.serverError(503), { code: 'unavailable', retryable: true, details: { status: 503 } }],
    ['401', scripts.unauthorized(KEY), { code: 'unauthenticated', retryable: false }],
    ['403', scripts.forbidden(), { code: 'unauthorized', retryable: false }],
    ['404', scripts.notFound(), { code: 'unavailable', retryable: false, details: { reason: 'provider_not_found' } }],
    [
      'malformed JSON body',
      scripts.malformed('bad_json'),
      { code: 'runtime_error', details: { reason: 'malformed_response' } },
    ],
  ];

  it.each(cases)('invoke: %s', async (_name, script, expected) => {
    server.chat(script);
    const e = await failure(f.service.invoke(runCall(), req()));
    expect(e).toMatchObject(expected);
    expect(e.message).not.toContain(KEY);
    expect(JSON.stringify(e.details)).not.toContain(KEY);
    expect(f.repo.usageRows).toEqual([expect.objectContaining({ operation: 'invoke', complete: false })]);
  });

  it('a 401 shows none of the provider text (it echoes the key)', async () => {
    server.chat(scripts.unauthorized(KEY));
    const e = await failure(f.service.invoke(runCall(), req()));
    expect(e.message).toBe('model m: the provider rejected the API key (HTTP 401)');
  });

  it.each([
    ['context_length_exceeded', scripts.contextLengthExceeded(), 'invalid_argument'],
    ['429', scripts.rateLimited(), 'rate_limited'],
    ['502', scripts.serverError(502), 'unavailable'],
  ])('stream, before the first chunk: %s', async (_name, script, code) => {
    server.chat(script);
    expect(await failure(collect(f.service.stream(runCall(), req())))).toMatchObject({ code });
  });

  it.each([
    ['bad_json', 'runtime_error', 'malformed_response'],
    ['no_finish', 'runtime_error', 'malformed_response'],
    ['error_event', 'unavailable', 'provider_error'],
    ['reset', 'unavailable', 'connection_lost'],
  ] as const)('stream, malformed mid-stream (%s) → %s after the chunks already sent', async (mode, code, reason) => {
    server.chat(scripts.malformed(mode));
    const seen: unknown[] = [];
    const e = await failure(
      (async () => {
        for await (const item of f.service.stream(runCall(), req())) {
          seen.push(item.chunk?.content);
        }
      })(),
    );
    expect(e).toMatchObject({ code, details: { reason } });
    expect(seen).toEqual(['partial ', 'answer']);
    expect(f.repo.usageRows).toEqual([expect.objectContaining({ operation: 'stream', complete: false })]);
  });

  it('connection refused (a closed port) → unavailable, retryable', async () => {
    await f.registry.create('closed', chatModel(`http://127.0.0.1:${await closedPort()}/v1`));
    const e = await failure(f.service.invoke(runCall(), req({ model_id: 'closed' })));
    expect(e).toMatchObject({ code: 'unavailable', retryable: true, details: { reason: 'connection_failed' } });
    expect(e.message).toContain('ECONNREFUSED');
    const s = await failure(collect(f.service.stream(runCall(), req({ model_id: 'closed' }))));
    expect(s).toMatchObject({ code: 'unavailable', retryable: true });
  });

  it('timeout_ms → deadline_exceeded {reason: timeout}, retryable', async () => {
    server.chat(scripts.hang());
    const started = Date.now();
    const e = await failure(f.service.invoke(runCall(), req({ timeout_ms: 150 })));
    expect(e).toMatchObject({
      code: 'deadline_exceeded',
      retryable: true,
      details: { reason: 'timeout', timeout_ms: 150 },
    });
    expect(Date.now() - started).toBeLessThan(2000);
  });

  it('a stream idle longer than timeout_ms between chunks → timeout; a slow but steady stream is fine', async () => {
    server.chat(scripts.completion({ deltas: ['a', 'b', 'c', 'd'] }, { chunk_delay_ms: 60 }));
    const ok = await collect(f.service.stream(runCall(), req({ timeout_ms: 200 })));
    expect(ok.at(-2)!.chunk).toMatchObject({ all_content: 'abcd', is_final: true });
    server.chat(scripts.completion({ deltas: ['a', 'b'] }, { chunk_delay_ms: 400 }));
    const e = await failure(collect(f.service.stream(runCall(), req({ timeout_ms: 200 }))));
    expect(e).toMatchObject({ code: 'deadline_exceeded', details: { reason: 'timeout' } });
  });

  it('the run deadline bounds the call → deadline_exceeded {reason: run_deadline}, not retryable', async () => {
    server.chat(scripts.hang());
    const e = await failure(
      f.service.invoke(runCall({ deadline_at_ms: Date.now() + 150 }), req({ timeout_ms: 60_000 })),
    );
    expect(e).toMatchObject({ code: 'deadline_exceeded', retryable: false, details: { reason: 'run_deadline' } });
    const late = await failure(f.service.invoke(runCall({ deadline_at_ms: Date.now() - 1 }), req()));
    expect(late).toMatchObject({ details: { reason: 'run_deadline' } });
  });

  it('the run ending aborts a stream in flight → deadline_exceeded {reason: cancelled}, metered incomplete', async () => {
    server.chat(scripts.completion({ deltas: ['one', 'two', 'three'] }, { chunk_delay_ms: 150 }));
    const call = runCall();
    const seen: string[] = [];
    const e = await failure(
      (async () => {
        for await (const item of f.service.stream(call, req())) {
          seen.push(item.chunk!.content as string);
          call.abort.abort();
        }
      })(),
    );
    expect(e).toMatchObject({ code: 'deadline_exceeded', retryable: false, details: { reason: 'cancelled' } });
    expect(seen).toEqual(['one']);
    expect(f.repo.usageRows).toEqual([expect.objectContaining({ operation: 'stream', complete: false })]);
  });

  it('an already-ended run calls nothing', async () => {
    const call = runCall();
    call.abort.abort();
    expect(await failure(f.service.invoke(call, req()))).toMatchObject({ details: { reason: 'cancelled' } });
    expect(server.requests).toHaveLength(0);
  });

  it('redact masks the key and key-like strings, and bounds the length', () => {
    expect(redact(`bad key ${KEY} and sk-other0123456789 Bearer abc.def`, KEY)).toBe(
      'bad key [redacted] and [redacted] [redacted]',
    );
    expect(redact('x'.repeat(600), null)).toHaveLength(501);
  });
});
