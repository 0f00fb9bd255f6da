import { ConfigError, loadConfig } from '@libs/config';

const problemsOf = (env: Record<string, string>): string[] => {
  try {
    loadConfig(env);
  } catch (e) {
    if (e instanceof ConfigError) {
      return e.problems;
    }
    throw e;
  }
  return [];
};

describe('loadConfig: CORS origins and stream tokens', () => {
  it('defaults: CORS off, 5-minute stream tokens', () => {
    expect(loadConfig({}).browser).toEqual({ corsOrigins: [], corsAnyOrigin: false, streamTokenTtlMs: 300_000 });
  });

  it('reads comma-separated origins (lower-cased, as browsers send them) or *', () => {
    expect(
      loadConfig({
        CORS_ALLOWED_ORIGINS: 'https://Console.example.com, http://localhost:5173',
        STREAM_TOKEN_TTL_SECONDS: '60',
      }).browser,
    ).toEqual({
      corsOrigins: ['https://console.example.com', 'http://localhost:5173'],
      corsAnyOrigin: false,
      streamTokenTtlMs: 60_000,
    });
    expect(loadConfig({ CORS_ALLOWED_ORIGINS: '*' }).browser).toMatchObject({ corsOrigins: [], corsAnyOrigin: true });
  });

  it.each(['https://ok.test/with/path', 'ok.test', 'https://a.test,', 'ftp://a.test', 'https://a.test/'])(
    'refuses CORS_ALLOWED_ORIGINS=%s, naming the variable',
    (value) => {
      expect(problemsOf({ CORS_ALLOWED_ORIGINS: value })).toEqual([
        expect.stringMatching(/^CORS_ALLOWED_ORIGINS=.*must be \* or comma-separated origins/),
      ]);
    },
  );

  it.each(['5', '86401', 'soon'])('refuses STREAM_TOKEN_TTL_SECONDS=%s', (value) => {
    expect(problemsOf({ STREAM_TOKEN_TTL_SECONDS: value })).toEqual([
      expect.stringMatching(/^STREAM_TOKEN_TTL_SECONDS=/),
    ]);
  });
});
