import { MIN_POSTGRES_VERSION_NUM, postgresMajor, postgresVersionProblem } from './pg-version';

describe('the PostgreSQL version the host needs (docs/deployment.md#postgresql-version)', () => {
  it('is 14 (pg_terminate_backend with a timeout)', () => {
    expect(MIN_POSTGRES_VERSION_NUM).toBe(140000);
    expect(postgresMajor(MIN_POSTGRES_VERSION_NUM)).toBe('14');
  });

  it.each([
    [140000, '14.0'],
    [140013, '14.13'],
    [150020, '15.20 (Debian 15.20-0+deb12u1)'],
    [170002, '17.2'],
  ])('admits %i (%s)', (num, version) => {
    expect(postgresVersionProblem(num, version)).toBeNull();
  });

  it.each([
    [130016, '13.16', 'PostgreSQL 13.16 (server_version_num 130016)'],
    [120000, '12.0', 'PostgreSQL 12.0 (server_version_num 120000)'],
    [90624, '9.6.24', 'PostgreSQL 9.6.24 (server_version_num 90624)'],
  ])('refuses %i, naming the version found and the one required', (num, version, found) => {
    expect(postgresVersionProblem(num, version)).toBe(
      `${found} is older than the host needs: PostgreSQL 14 or later (server_version_num >= 140000; docs/deployment.md#postgresql-version)`,
    );
  });

  it('names a major version before 10 with its minor part', () => {
    expect(postgresMajor(90624)).toBe('9.6');
  });

  it('refuses what is not a version number', () => {
    expect(postgresVersionProblem(Number.NaN, '')).toMatch(/is not a version number/);
  });
});
