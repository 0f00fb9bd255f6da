import * as os from 'node:os';
import { performance } from 'node:perf_hooks';

/* Lines every bench report prints: the machine, the time and load, the problems found. */

export function machineLine(): string {
  const cpus = os.cpus();
  const model = cpus[0]?.model.trim() ?? 'unknown CPU';
  const mem = (os.totalmem() / 2 ** 30).toFixed(1);
  return `${cpus.length} cores (${model}), ${mem} GiB RAM, ${os.type()} ${os.release()} ${os.arch()}, Node ${process.version}`;
}

/** The last line of a report: how long the bench took and the 1-minute load average before and after. */
export function benchTimeLine(startedMs: number, loadBefore: number): string {
  return `total bench time: ${((performance.now() - startedMs) / 1000).toFixed(1)} s; 1-min load average ${loadBefore.toFixed(2)} at start, ${os.loadavg()[0].toFixed(2)} at end`;
}

/** Groups lines that differ only in ids and numbers: "12× <first line>". */
export function groupLines(lines: readonly string[]): string[] {
  const groups = new Map<string, { first: string; count: number }>();
  for (const line of lines) {
    const key = line
      .replace(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/gi, '<id>')
      .replace(/\d+/g, 'N');
    const g = groups.get(key);
    if (g) {
      g.count++;
    } else {
      groups.set(key, { first: line, count: 1 });
    }
  }
  return [...groups.values()].map((g) => `- ${g.count}× ${g.first}`);
}
