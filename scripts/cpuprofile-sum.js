// Sums a V8 .cpuprofile (node --cpu-prof) by self time per function and per file, optionally
// within a time window, and the inclusive time of frames matching a pattern. Used for the host's
// profiles during bench/host-api (docs/benchmarks.md: BENCH_HOST_NODE_ARGS="--cpu-prof
// --cpu-prof-interval=100 --cpu-prof-dir=DIR"). Times are sample deltas (wall clock of the
// profiled thread): on a loaded machine a preempted thread's gap lands on whatever ran next, so
// compare shares of large items, not small ones.
//
// usage: node scripts/cpuprofile-sum.js FILE [--segments] [--seg N] [--window FROM_MS TO_MS]
//                                           [--under RE] [--grep RE] [--top N]
//   --segments       the spans (250 ms buckets) whose samples are mostly under a StateGet /
//                    HistoryPage handler of the host (S / H), in order: the bench's levels
//   --seg N          the window = the N-th span of that list
//   --window A B     only samples from A to B ms after the profile's start
//   --under RE       only samples with a frame matching RE on their stack ("name url:line")
//   --grep RE        also the inclusive time of each frame matching RE
//   --top N          rows per table (40)
const fs = require('fs');
const args = process.argv.slice(2);
const file = args[0];
const opt = (n, d) => {
  const i = args.indexOf(n);
  return i < 0 ? d : args[i + 1];
};
const p = JSON.parse(fs.readFileSync(file, 'utf8'));
const byId = new Map();
for (const n of p.nodes) byId.set(n.id, n);
const parent = new Map();
for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
// sample times
const t = [];
let acc = p.startTime;
for (let i = 0; i < p.samples.length; i++) {
  acc += p.timeDeltas[i];
  t.push((acc - p.startTime) / 1000); // ms from start
}
const dur = (i) => (i + 1 < t.length ? t[i + 1] - t[i] : 0);
const stackHas = new Map();
function tags(id) {
  if (stackHas.has(id)) return stackHas.get(id);
  const n = byId.get(id);
  const fn = n.callFrame.functionName;
  let tag = 0;
  if (/^stateGet$|StateService\.get|^get$/.test(fn) && /state/i.test(n.callFrame.url)) tag |= 1;
  if (/historyPage|^page$/.test(fn) && /transcript|context-api/i.test(n.callFrame.url)) tag |= 2;
  const par = parent.get(id);
  if (par !== undefined) tag |= tags(par);
  stackHas.set(id, tag);
  return tag;
}
if (args.includes('--segments') || opt('--seg')) {
  const B = 250;
  const buckets = new Map();
  for (let i = 0; i < p.samples.length; i++) {
    const b = Math.floor(t[i] / B);
    const tg = tags(p.samples[i]);
    const o = buckets.get(b) ?? { s: 0, h: 0 };
    if (tg & 1) o.s++;
    if (tg & 2) o.h++;
    buckets.set(b, o);
  }
  const keys = [...buckets.keys()].sort((a, b) => a - b);
  const segs = [];
  let cur = null;
  for (const k of keys) {
    const o = buckets.get(k);
    const kind = o.s > 2 && o.s > o.h ? 'S' : o.h > 2 && o.h > o.s ? 'H' : null;
    if (kind && cur && cur.kind === kind && k - cur.end <= 2) cur.end = k;
    else if (kind) {
      cur = { kind, start: k, end: k };
      segs.push(cur);
    }
  }
  const list = segs
    .filter((s) => s.end - s.start >= 2)
    .map((s) => ({ kind: s.kind, start: s.start * B, end: (s.end + 1) * B }));
  if (args.includes('--segments')) {
    for (const [i, s] of list.entries())
      console.log(i, s.kind, s.start, s.end, ((s.end - s.start) / 1000).toFixed(2) + ' s');
  }
  if (opt('--seg')) {
    const s = list[Number(opt('--seg'))];
    args.push('--window', String(s.start), String(s.end));
    console.log(`window: segment ${opt('--seg')} ${s.kind} ${s.start}–${s.end} ms`);
  }
}
let w0 = -Infinity,
  w1 = Infinity;
const wi = args.lastIndexOf('--window');
if (wi >= 0) {
  w0 = Number(args[wi + 1]);
  w1 = Number(args[wi + 2]);
}
const self = new Map();
const files = new Map();
let total = 0,
  idle = 0;
const re = opt('--grep') ? new RegExp(opt('--grep')) : null;
const incl = new Map();
const under = opt('--under') ? new RegExp(opt('--under')) : null;
for (let i = 0; i < p.samples.length; i++) {
  if (t[i] < w0 || t[i] >= w1) continue;
  if (under) {
    let ok = false;
    for (let id = p.samples[i]; id !== undefined && !ok; id = parent.get(id)) {
      const m = byId.get(id);
      ok = under.test(
        `${m.callFrame.functionName} ${m.callFrame.url.replace(/^.*\/(node_modules|dist)\//, '$1/')}:${m.callFrame.lineNumber + 1}`,
      );
    }
    if (!ok) continue;
  }
  const d = dur(i);
  const n = byId.get(p.samples[i]);
  const fn = n.callFrame.functionName || '(anon)';
  total += d;
  if (fn === '(idle)') {
    idle += d;
    continue;
  }
  const url = n.callFrame.url.replace(/^.*\/(node_modules|dist)\//, '$1/');
  const key = `${fn} ${url}:${n.callFrame.lineNumber + 1}`;
  self.set(key, (self.get(key) ?? 0) + d);
  const fkey = url || `(${fn})`;
  files.set(fkey, (files.get(fkey) ?? 0) + d);
  if (re) {
    // inclusive time of frames matching re (counted once per sample)
    const seen = new Set();
    for (let id = p.samples[i]; id !== undefined; id = parent.get(id)) {
      const m = byId.get(id);
      const k = `${m.callFrame.functionName} ${m.callFrame.url.replace(/^.*\/(node_modules|dist)\//, '$1/')}:${m.callFrame.lineNumber + 1}`;
      if (re.test(k) && !seen.has(k)) {
        seen.add(k);
        incl.set(k, (incl.get(k) ?? 0) + d);
      }
    }
  }
}
const busy = total - idle;
const top = Number(opt('--top', 40));
console.log(`window ${total.toFixed(0)} ms, busy ${busy.toFixed(0)} ms (idle ${idle.toFixed(0)})`);
const show = (m, title) => {
  console.log(`\n## ${title}`);
  for (const [k, v] of [...m.entries()].sort((a, b) => b[1] - a[1]).slice(0, top)) {
    console.log(`${v.toFixed(1).padStart(9)} ms ${((100 * v) / busy).toFixed(2).padStart(6)} %  ${k}`);
  }
};
show(self, 'self time by function');
show(files, 'self time by file');
if (re) show(incl, `inclusive time of frames matching ${re}`);
