/*
 * A strict parser of the Prometheus text exposition format (version 0.0.4) for the metrics e2e
 * test: no npm package here parses it (prom-client only writes it). It rejects what Prometheus
 * would: a sample before its family's TYPE, a bad metric or label name, a bad escape, a value
 * that is not a float, a duplicate series, a TYPE given twice.
 */

export type MetricType = 'counter' | 'gauge' | 'histogram' | 'summary' | 'untyped';

export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

export interface Family {
  name: string;
  type: MetricType;
  help: string;
  samples: Sample[];
}

const NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL = /^[a-zA-Z_][a-zA-Z0-9_]*$/;
const TYPES = ['counter', 'gauge', 'histogram', 'summary', 'untyped'];
const SUFFIXES: Record<MetricType, string[]> = {
  counter: [''],
  gauge: [''],
  untyped: [''],
  histogram: ['_bucket', '_sum', '_count'],
  summary: ['', '_sum', '_count'],
};

function fail(n: number, line: string, why: string): never {
  throw new Error(`metrics line ${n + 1}: ${why}: ${JSON.stringify(line)}`);
}

function parseValue(text: string, n: number, line: string): number {
  // As Prometheus reads a value (Go's ParseFloat): Inf and NaN in any case; prom-client writes
  // an empty event-loop histogram's mean as `Nan`.
  if (/^\+?inf(inity)?$/i.test(text)) return Infinity;
  if (/^-inf(inity)?$/i.test(text)) return -Infinity;
  if (/^nan$/i.test(text)) return NaN;
  if (!/^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/.test(text)) {
    fail(n, line, `value ${JSON.stringify(text)} is not a float`);
  }
  return Number(text);
}

/** Parses `{a="x",b="y"}` starting at `i` (the `{`); returns the labels and the index after `}`. */
function parseLabels(line: string, i: number, n: number): [Record<string, string>, number] {
  const labels: Record<string, string> = {};
  i++;
  while (line[i] !== '}') {
    const eq = line.indexOf('=', i);
    if (eq < 0) fail(n, line, 'label without =');
    const name = line.slice(i, eq);
    if (!LABEL.test(name)) fail(n, line, `bad label name ${JSON.stringify(name)}`);
    if (name in labels) fail(n, line, `label ${name} given twice`);
    if (line[eq + 1] !== '"') fail(n, line, 'label value not quoted');
    let j = eq + 2;
    let value = '';
    for (;;) {
      const c = line[j];
      if (c === undefined) fail(n, line, 'unterminated label value');
      if (c === '"') break;
      if (c === '\\') {
        const e = line[j + 1];
        if (e === 'n') value += '\n';
        else if (e === '\\' || e === '"') value += e;
        else fail(n, line, `bad escape \\${e}`);
        j += 2;
        continue;
      }
      value += c;
      j++;
    }
    labels[name] = value;
    i = j + 1;
    if (line[i] === ',') i++;
    else if (line[i] !== '}') fail(n, line, 'expected , or } after a label');
  }
  return [labels, i + 1];
}

export function parsePrometheusText(text: string): Map<string, Family> {
  const families = new Map<string, Family>();
  const seen = new Set<string>();
  const lines = text.split('\n');
  lines.forEach((line, n) => {
    if (line === '') return;
    if (line.startsWith('#')) {
      const m = /^# (HELP|TYPE) (\S+) ?(.*)$/.exec(line);
      if (!m) return; // a comment
      const [, kind, name, rest] = m;
      if (!NAME.test(name)) fail(n, line, `bad metric name ${name}`);
      const family = families.get(name) ?? { name, type: 'untyped' as MetricType, help: '', samples: [] };
      families.set(name, family);
      if (kind === 'TYPE') {
        if (!TYPES.includes(rest)) fail(n, line, `unknown type ${rest}`);
        if (family.samples.length > 0 || (family as Family & { typed?: boolean }).typed) {
          fail(n, line, 'TYPE after samples or given twice');
        }
        family.type = rest as MetricType;
        (family as Family & { typed?: boolean }).typed = true;
      } else {
        family.help = rest.replace(/\\n/g, '\n').replace(/\\\\/g, '\\');
      }
      return;
    }
    const brace = line.indexOf('{');
    const space = line.indexOf(' ');
    const nameEnd = brace >= 0 && brace < space ? brace : space;
    if (nameEnd <= 0) fail(n, line, 'no value');
    const name = line.slice(0, nameEnd);
    if (!NAME.test(name)) fail(n, line, `bad metric name ${name}`);
    let labels: Record<string, string> = {};
    let i = nameEnd;
    if (line[i] === '{') [labels, i] = parseLabels(line, i, n);
    if (line[i] !== ' ') fail(n, line, 'expected a space before the value');
    const parts = line.slice(i + 1).split(' ');
    if (parts.length < 1 || parts.length > 2) fail(n, line, 'expected a value and an optional timestamp');
    const value = parseValue(parts[0], n, line);
    if (parts[1] !== undefined && !/^-?\d+$/.test(parts[1])) fail(n, line, 'bad timestamp');
    const family = [...families.values()].find((f) => SUFFIXES[f.type].some((s) => f.name + s === name));
    if (!family) fail(n, line, `sample of ${name} has no TYPE before it`);
    const key = `${name}${JSON.stringify(Object.entries(labels).sort())}`;
    if (seen.has(key)) fail(n, line, 'duplicate series');
    seen.add(key);
    if (family.type === 'histogram' && name.endsWith('_bucket') && labels.le === undefined) {
      fail(n, line, 'histogram bucket without le');
    }
    family.samples.push({ name, labels, value });
  });
  return families;
}

/** A scrape, with lookups that fail loudly when a series is missing. */
export class Scrape {
  constructor(readonly families: Map<string, Family>) {}

  family(name: string): Family {
    const f = this.families.get(name);
    if (!f) throw new Error(`metric family ${name} is not exported`);
    return f;
  }

  /** Sum of the samples named `sample` whose labels include `match` (0 when none). */
  sum(sample: string, match: Record<string, string> = {}): number {
    let total = 0;
    for (const f of this.families.values()) {
      for (const s of f.samples) {
        if (s.name === sample && Object.entries(match).every(([k, v]) => s.labels[k] === v)) total += s.value;
      }
    }
    return total;
  }

  /** Every label value of `label` among the samples named `sample`. */
  labelValues(sample: string, label: string): string[] {
    const out = new Set<string>();
    for (const f of this.families.values()) {
      for (const s of f.samples) {
        if (s.name === sample && s.labels[label] !== undefined) out.add(s.labels[label]);
      }
    }
    return [...out];
  }
}

export async function scrape(base: string): Promise<Scrape> {
  const res = await fetch(`${base}/metrics`);
  if (res.status !== 200) throw new Error(`GET /metrics answered ${res.status}`);
  const type = res.headers.get('content-type') ?? '';
  if (!type.startsWith('text/plain') || !type.includes('version=0.0.4')) {
    throw new Error(`GET /metrics content-type ${type}`);
  }
  return new Scrape(parsePrometheusText(await res.text()));
}
