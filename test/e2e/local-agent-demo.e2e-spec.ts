import { spawn } from 'node:child_process';
import * as path from 'node:path';

/*
 * `npm run demo` as a newcomer runs it (the build output of `npm run build`, as the npm script
 * runs it): the host with SQLite in a temp dir, the scripted model server and the built-in local
 * agent, offline. It must exit 0 and show each step of the walk.
 */

jest.setTimeout(120_000);

const ROOT = path.resolve(__dirname, '..', '..');

describe('npm run demo', () => {
  it('walks the conversation: streaming, a tool call, a steered follow-up, a cancel, a tool approval, the admin views', async () => {
    const child = spawn(process.execPath, [path.join(ROOT, 'dist/scripts/demo/main.js')], {
      cwd: ROOT,
      // No DATABASE_URL: the demo always uses its own SQLite; no network beyond loopback.
      env: { ...process.env, DATABASE_URL: '', E2E_DATABASE: '' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    // 'close', not 'exit': at 'exit' the end of the output may still be in the pipe.
    const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
    expect({ code, err: code === 0 ? '' : err + out }).toEqual({ code: 0, err: '' });

    const sections = [...out.matchAll(/^── (.+?) ─/gm)].map((m) => m[1]);
    expect(sections).toEqual([
      'Setup',
      '1. Streaming',
      '2. A tool call',
      '3. A steered follow-up',
      '4. A cancel',
      '5. A tool approval',
      expect.stringMatching(/^6\. Admin views of run [0-9a-f]{8}/),
      'Done',
    ]);
    expect(out).toContain('builtin:local-agent/default (builtin, connected)');
    expect(out).toContain('agent> Hello! I am the built-in local agent of this host. Ask me anything.');
    expect(out).toMatch(/↳ tool current_time\(\{"timezone":"UTC"\}\)/);
    expect(out).toMatch(/works: steered\)/);
    expect(out).toContain('The follow-up reached the running agent at its next turn.');
    expect(out).toContain('[cancel sent]');
    expect(out).toMatch(/\[run [0-9a-f]{8}: run\.failed \(cancelled/);
    expect(out).toContain('asked  Approve tool call: current_time: - current_time({"timezone":"UTC"})');
    expect(out).toMatch(/you> {3}\[approve\] {3}\(the submission started run [0-9a-f]{8}\)/);
    expect(out).toContain('a second submission of the token: 409');
    expect(out).toMatch(/timeline {2}.*interaction\.requested.*interaction\.submitted.*run\.created/);
    expect(out).toMatch(/authorization snapshot {2}[0-9a-f]{64} \(verified\)/);
    expect(out).toMatch(/tool\.call\s+tool:current_time\s+allowed/);
  });
});
