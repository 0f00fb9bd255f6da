import { Writable } from 'node:stream';
import { telemetry } from '@libs/telemetry';
import { JsonLogger, scrubStreamTokens } from './json-logger';

const TOKEN = 'rhst_eyJyIjoiYSIsImsiOiJiIn0.AbCdEfGhIjKlMnOpQrStUvWxYz0123456789-_abcde';

function capture(): { logger: JsonLogger; lines: () => string[] } {
  const out: string[] = [];
  const dest = new Writable({
    write(chunk: Buffer, _enc, cb) {
      out.push(chunk.toString());
      cb();
    },
  });
  // pino writes synchronously to a plain stream given as its destination.
  return { logger: new JsonLogger('info', dest), lines: () => out.join('').trim().split('\n') };
}

describe('JsonLogger: stream tokens never reach a log line', () => {
  it('scrubs a token and a stream_token query value from strings', () => {
    expect(scrubStreamTokens(`/v1/runs/x/events?stream_token=${TOKEN}&after=3`)).toBe(
      '/v1/runs/x/events?stream_token=[Redacted]&after=3',
    );
    expect(scrubStreamTokens(`token ${TOKEN} refused`)).toBe('token rhst_[Redacted] refused');
    expect(scrubStreamTokens('nothing to see')).toBe('nothing to see');
  });

  it('redacts messages, msg fields, urls, query fields and stacks', () => {
    const { logger, lines } = capture();
    logger.log(`GET /v1/runs/r/events?stream_token=${TOKEN}`);
    logger.warn({ msg: `refused ${TOKEN}`, run_id: 'r' });
    logger.log({ req: { url: `/v1/runs/r/events?after=1&stream_token=${TOKEN}`, query: { stream_token: TOKEN } } });
    logger.error('failed', `Error: x\n    at handler (${TOKEN})`, 'Ctx');
    const text = lines().join('\n');
    expect(text).not.toContain(TOKEN.slice(5, 30));
    const [first, second, third, fourth] = lines().map((l) => JSON.parse(l) as Record<string, any>);
    expect(first.msg).toBe('GET /v1/runs/r/events?stream_token=[Redacted]');
    expect(second).toMatchObject({ msg: 'refused rhst_[Redacted]', run_id: 'r' });
    expect(third.req).toEqual({
      url: '/v1/runs/r/events?after=1&stream_token=[Redacted]',
      query: { stream_token: '[Redacted]' },
    });
    expect(fourth.stack).toContain('rhst_[Redacted]');
  });
});

describe('JsonLogger: the run path asks its level before it builds a line (telemetry.logs)', () => {
  afterEach(() => telemetry.logs.use(null));

  it('answers by the logger it belongs to: its LOG_LEVEL, then what Nest sets', () => {
    const sink = new Writable({ write: (_c, _e, cb) => cb() });
    new JsonLogger('warn', sink);
    expect(
      ['verbose', 'debug', 'log', 'warn', 'error', 'fatal'].map((l) => telemetry.logs.enabled(l as never)),
    ).toEqual([false, false, false, true, true, true]);
    const info = new JsonLogger('info', sink);
    expect(telemetry.logs.enabled('log')).toBe(true);
    expect(telemetry.logs.enabled('debug')).toBe(false);
    info.setLogLevels(['debug', 'log', 'warn', 'error', 'fatal']);
    expect(telemetry.logs.enabled('debug')).toBe(true);
    new JsonLogger('trace', sink);
    expect(telemetry.logs.enabled('verbose')).toBe(true);
    new JsonLogger('silent', sink);
    expect(telemetry.logs.enabled('fatal')).toBe(false);
  });

  it('every level is on while no logger has registered (unit tests and tools lose no line)', () => {
    expect(telemetry.logs.enabled('verbose')).toBe(true);
    expect(telemetry.logs.enabled('log')).toBe(true);
  });
});
