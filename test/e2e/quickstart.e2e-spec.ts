import { spawn, spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { Host, TestDatabase, parseSse } from './harness';

/*
 * The README's Quick start, pasted as one block: the second bash block of the section is run as
 * written, against a host with a generated admin key (no ADMIN_API_KEY), with only the addresses
 * and file locations moved to this test's ports and folders. The demo runner says "connected"
 * before the event goes out, and exits 2 with a reason on a bad token.
 */

jest.setTimeout(120_000);

const ROOT = path.resolve(__dirname, '..', '..');
const RUNNER_MAIN = 'dist/apps/demo-runner/src/main.js';

function quickStartBlock(): string {
  const readme = fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8');
  const section = readme.slice(
    readme.indexOf('## Quick start'),
    readme.indexOf('\n## ', readme.indexOf('## Quick start') + 1),
  );
  const blocks = [...section.matchAll(/```bash\n([\s\S]*?)```/g)].map((m) => m[1]);
  expect(blocks).toHaveLength(2);
  return blocks[1];
}

describe('README Quick start, pasted as one block', () => {
  const db = new TestDatabase();
  // ADMIN_API_KEY empty = unset: the host generates the key and saves it to DATA_DIR/admin-api-key.
  const host = new Host(db, { ADMIN_API_KEY: '' });
  const runnerLog = path.join(db.dataDir, 'demo-runner.log');

  beforeAll(async () => {
    await host.start();
  });

  afterAll(async () => {
    await host.stop();
    await db.drop();
  });

  it('waits for the demo runner to connect, then the run streams to its terminal result', async () => {
    const block = quickStartBlock()
      .replaceAll('localhost:3000', host.http.replace('http://', ''))
      .replaceAll('data/admin-api-key', path.join(db.dataDir, 'admin-api-key'))
      .replaceAll('demo-runner.log', runnerLog);
    const script = `set -u\nexport RUNNERHOST_GRPC_URL=${host.grpc}\n${block}\nkill $RUNNER\nwait $RUNNER\n`;
    const child = spawn('bash', ['-c', script], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (err += d.toString())); // curl's progress meter
    // 'close', not 'exit': at 'exit' the end of the output may still be in the pipe.
    const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
    expect({ code, out: code === 0 ? '' : out + err }).toEqual({ code: 0, out: '' });

    // The runner's last line before the event was its "connected" line.
    const connected = out.split('\n').find((l) => l.includes('"msg":"connected"'));
    expect(JSON.parse(connected!)).toMatchObject({
      level: 'info',
      msg: 'connected',
      runners: ['plugin:demo/echo/default'],
    });
    const events = parseSse(out.slice(out.indexOf('id:')));
    expect(events.map((e) => e.event)).toContain('message.delta');
    expect(events.at(-1)!.event).toBe('run.completed');
    expect(events.find((e) => e.event === 'message.completed')!.data.data).toEqual({
      message: { role: 'assistant', content: 'hello there, runner' },
    });
  });

  it('a demo runner with a bad token exits 2 and says why', () => {
    const r = spawnSync(process.execPath, [RUNNER_MAIN], {
      cwd: ROOT,
      env: { ...process.env, RUNNERHOST_GRPC_URL: host.grpc, RUNNERHOST_PLUGIN_TOKEN: 'rhp_not-a-token' },
      encoding: 'utf8',
      timeout: 30_000,
    });
    expect(r.status).toBe(2);
    expect(r.stderr).toContain(
      'demo-runner: not connected: the host refused the plugin (UNAUTHENTICATED: invalid plugin token)',
    );
    expect(r.stdout).not.toContain('"msg":"connected"');
  });
});
