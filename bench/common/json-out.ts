import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

/*
 * What every bench's --json output shares: numbers rounded (NaN becomes null), the machine the
 * figures were measured on, and the writing of the file. Times are in the unit their key names
 * (…_ms, …_us).
 */

/** Rounds to 3 decimals and turns non-finite numbers into null. */
export function num(n: number): number | null {
  return Number.isFinite(n) ? Math.round(n * 1000) / 1000 : null;
}

export function machineJson(): Record<string, unknown> {
  const cpus = os.cpus();
  return {
    cores: cpus.length,
    cpu: cpus[0]?.model.trim() ?? null,
    mem_gib: num(os.totalmem() / 2 ** 30),
    os: `${os.type()} ${os.release()} ${os.arch()}`,
    node: process.version,
    loadavg_1m: num(os.loadavg()[0]),
  };
}

/** Writes `doc` as pretty JSON, creating the directory; says where on stderr. */
export function writeJson(file: string, doc: unknown): void {
  const target = path.resolve(file);
  fs.mkdirSync(path.dirname(target), { recursive: true });
  fs.writeFileSync(target, JSON.stringify(doc, null, 2) + '\n');
  process.stderr.write(`bench: figures written to ${target}\n`);
}
