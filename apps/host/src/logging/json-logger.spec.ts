import { Writable } from 'node:stream';
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
