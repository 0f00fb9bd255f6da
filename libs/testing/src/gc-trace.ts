import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';

/**
 * Runs `source` (CommonJS) as `dir/name.js` in a child Node with V8's GC trace and answers the
 * median bytes that survived each of its last `last` scavenges (`new_space_survived`): what the
 * young-generation GC copied or promoted. An allocation-driven workload gives the same figure on
 * any machine — the specs of the GC findings use it (docs/benchmarks.md, round 16).
 */
export function medianSurvivedPerScavenge(dir: string, name: string, source: string, last = 10): number {
  const script = path.join(dir, `${name}.js`);
  fs.writeFileSync(script, source);
  const out = spawnSync(process.execPath, ['--max-semi-space-size=16', '--trace-gc-nvp', script], {
    cwd: dir,
    encoding: 'utf8',
  });
  if (out.status !== 0) {
    throw new Error(`${name}.js exited ${out.status}: ${out.stderr}`);
  }
  const survived = out.stdout
    .split('\n')
    .filter((l) => l.includes('gc=s '))
    .map((l) => Number(/new_space_survived=(\d+)/.exec(l)?.[1]));
  if (survived.length < last) {
    throw new Error(`${name}.js: ${survived.length} scavenges traced, fewer than ${last}`);
  }
  return survived.slice(-last).sort((x, y) => x - y)[Math.floor(last / 2)];
}
