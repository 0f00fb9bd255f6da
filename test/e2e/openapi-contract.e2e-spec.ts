import { execFile } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { promisify } from 'node:util';
import { ADMIN_KEY, Host, TestDatabase } from './harness';

const ROOT = path.resolve(__dirname, '..', '..');
/** Inside the repository, so that the compiled walk resolves openapi-fetch from its node_modules. */
const OUT = path.join(ROOT, 'dist', 'contract');
const run = promisify(execFile);

/**
 * The contract test: a TypeScript client generated from the document the host serves, compiled
 * under strict tsc with test/contract/walk.ts, then that walk run against the host (plugin and demo
 * runner, agent, event, SSE with a stream token, run, transcript, admin views).
 */
describe('OpenAPI contract: a generated client compiles under strict tsc and walks the API', () => {
  const db = new TestDatabase();
  const host = new Host(db);

  beforeAll(async () => {
    await host.start();
    fs.rmSync(OUT, { recursive: true, force: true });
    fs.mkdirSync(OUT, { recursive: true });
  }, 60_000);
  afterAll(async () => {
    await host.stop();
    await db.drop();
  });

  it('generates, compiles and runs the walk', async () => {
    // The CLI, as a user runs it (the package is ESM). Request schemas show the defaults the host
    // fills in, and those are optional to send: --default-non-nullable=false.
    const cli = path.join(ROOT, 'node_modules', 'openapi-typescript', 'bin', 'cli.js');
    const schema = path.join(OUT, 'schema.d.ts');
    const generated = await run(process.execPath, [
      cli,
      `${host.http}/openapi.json`,
      '--default-non-nullable=false',
      '-o',
      schema,
    ]).catch((e: { stdout: string; stderr: string }) => e);
    expect(fs.existsSync(schema)).toBe(true);
    // Its built-in lint says only what .redocly.lint-ignore.yaml explains: no 4xx can answer the health probes.
    const remarks = generated.stderr.split('\n').filter((l) => l.trim() !== '');
    expect(
      remarks.filter((l) => !/Operation must have at least one `4XX` response\. at #\/paths\/~1health~1/.test(l)),
    ).toEqual([]);
    for (const file of ['walk.ts', 'tsconfig.json']) {
      fs.copyFileSync(path.join(ROOT, 'test', 'contract', file), path.join(OUT, file));
    }
    const tsc = path.join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');
    const compiled = await run(process.execPath, [tsc, '-p', path.join(OUT, 'tsconfig.json')], { cwd: ROOT }).catch(
      (e: { stdout: string; stderr: string }) => e,
    );
    expect(compiled.stdout + compiled.stderr).toBe('');

    const walked = await run(process.execPath, [path.join(OUT, 'walk.js')], {
      cwd: ROOT,
      env: {
        ...process.env,
        CONTRACT_HOST_URL: host.http,
        CONTRACT_GRPC_URL: host.grpc,
        CONTRACT_ADMIN_KEY: ADMIN_KEY,
        CONTRACT_RUNNER_MAIN: path.join(ROOT, 'dist/apps/demo-runner/src/main.js'),
      },
      timeout: 60_000,
    }).catch((e: { stdout: string; stderr: string }) => e);
    expect(walked.stderr).toBe('');
    expect(walked.stdout.trim().split('\n')).toEqual([
      'ok errors and health',
      'ok plugin and runner',
      'ok agent',
      'ok event',
      'ok sse',
      'ok run',
      'ok transcript',
      'ok admin views',
      'ok cleanup',
      'walk complete',
    ]);
  }, 120_000);
});
