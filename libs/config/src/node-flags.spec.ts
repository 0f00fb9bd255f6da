import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { HOST_NODE_FLAGS } from './node-flags';

const ROOT = path.resolve(__dirname, '..', '..', '..');

describe('HOST_NODE_FLAGS', () => {
  it('are the flags of `npm start`, before the host entry point', () => {
    const pkg = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as {
      scripts: Record<string, string>;
    };
    expect(pkg.scripts.start).toBe(['node', ...HOST_NODE_FLAGS, 'dist/apps/host/src/main.js'].join(' '));
  });

  it('are accepted by this Node.js (an unknown flag makes node exit 9 "bad option", which throws here)', () => {
    const out = execFileSync(process.execPath, [...HOST_NODE_FLAGS, '-e', "process.stdout.write('started')"], {
      encoding: 'utf8',
    });
    expect(out).toBe('started');
  });
});
