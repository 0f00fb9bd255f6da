import { parseArgs } from 'node:util';

/*
 * The command line of a bench: options, the usage text, and the exit codes (0 figures printed,
 * 1 a problem or failure, 2 a bad option with the usage text).
 */

/** A bad option: main() prints its message and the usage text and exits 2. */
export class UsageError extends Error {}

/** The usage text of a bench whose only option is --json. */
function jsonOnlyUsage(bench: string): string {
  return `usage: node dist/bench/${bench}/main.js [--json FILE]
  --json FILE   also write the figures and the same-run floors as JSON to FILE
  -h, --help    this text`;
}

/** Options of a bench whose only option is --json; a bad option is a UsageError. */
function parseJsonOnlyOptions(argv: string[]): { json: string | null } | 'help' {
  try {
    const { values } = parseArgs({
      args: argv,
      strict: true,
      allowPositionals: false,
      options: { json: { type: 'string' }, help: { type: 'boolean', short: 'h' } },
    });
    return values.help ? 'help' : { json: values.json ?? null };
  } catch (e) {
    throw new UsageError(e instanceof Error ? e.message : String(e));
  }
}

/** Runs a bench's main and exits with its code; a UsageError exits 2 with `usage`, any other error 1. */
export function runMain(main: () => Promise<number>, usage: string): void {
  main().then(
    (code) => process.exit(code),
    (e: unknown) => {
      if (e instanceof UsageError) {
        process.stderr.write(`bench: ${e.message}\n${usage}\n`);
        process.exit(2);
      }
      process.stderr.write(`bench: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`);
      process.exit(1);
    },
  );
}

/** Runs a bench whose only option is --json: --help prints the usage, a bad option exits 2. */
export function runJsonOnlyBench(bench: string, main: (opts: { json: string | null }) => Promise<number>): void {
  const usage = jsonOnlyUsage(bench);
  runMain(async () => {
    const opts = parseJsonOnlyOptions(process.argv.slice(2));
    if (opts === 'help') {
      process.stdout.write(`${usage}\n`);
      return 0;
    }
    return main(opts);
  }, usage);
}
