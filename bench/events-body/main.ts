import 'reflect-metadata';
import * as os from 'node:os';
import { performance } from 'node:perf_hooks';
import type { ArgumentMetadata } from '@nestjs/common';
import { validationPipe } from '../../apps/host/src/filters/validation';
import { submitEventBody } from '../../apps/host/src/http/dto/event.schema';
import { runJsonOnlyBench } from '../common/cli';
import { machineJson, num, writeJson } from '../common/json-out';
import { benchTimeLine, machineLine } from '../common/report';
import { fmtNum, markdownTable } from '../common/stats';
import { SubmitEventDto } from './class-validator-baseline';

/*
 * Host CPU per POST /v1/events body check, in process (no host, no HTTP): what the route runs on a
 * parsed body before the admission service sees it. "compiled" is the global pipe's JSON limits
 * (libs/protocol json-limits; the pipe skips the DTO pass for an interface-typed body) then the
 * compiled JSON schema (apps/host/src/http/dto/event.schema.ts); the same-run baseline
 * "class-validator" is the same pipe with the former DTO (class-transformer + class-validator).
 * Process CPU time per body over rounds of N bodies, best of 5 rounds (load only adds time);
 * the machine is shared: read the ratio, not the microseconds.
 *
 *   npm run bench:events-body -- [--json FILE]   (builds, then runs dist/bench/events-body/main.js)
 */

const ROUNDS = 5;
const PER_ROUND = 2_000;

const minimal = {
  agent_id: 'echo',
  event: { event_type: 'message.received', source: 'api' },
  conversation: { conversation_id: 'c1' },
  input: { text: 'hello there, runner' },
};

const typical = {
  agent_id: 'support-bot',
  event: {
    event_id: 'evt-000123',
    event_type: 'message.received',
    event_time: 1_764_000_000,
    source: 'platform',
    source_event_type: 'im.message',
    data: { channel: 'C123', team: 'T9', blocks: [{ type: 'rich_text', elements: ['a', 'b'] }] },
  },
  conversation: { conversation_id: 'C123:1700000000.0001', thread_id: 't-1', bot_id: 'B1', sender_id: 'U42' },
  actor: { actor_type: 'user', actor_id: 'U42', actor_name: 'Ada', metadata: { tz: 'Europe/Berlin' } },
  input: {
    text: 'Could you summarise the attached report and list the three main risks?',
    contents: [
      { type: 'text', text: 'Could you summarise the attached report?' },
      { type: 'image_url', image_url: { url: 'https://example.com/chart.png' } },
    ],
    attachments: [
      {
        type: 'file',
        mime_type: 'application/pdf',
        size: 48_213,
        name: 'report.pdf',
        source: 'url',
        url: 'https://example.com/r.pdf',
      },
    ],
  },
  delivery: { surface: 'slack', supports_edit: true, max_message_size: 4000, reply_target: { channel: 'C123' } },
  locale: 'en_US',
  timezone: 'Europe/Berlin',
  metadata: { trace: 'abc' },
};

const invalid = { ...typical, colour: 'red', event: { ...typical.event, source: 'mars' } };

type Check = (body: unknown) => Promise<unknown>;

const pipe = validationPipe();
const meta = (metatype: ArgumentMetadata['metatype']): ArgumentMetadata => ({ type: 'body', metatype });
const checks: Record<string, Check> = {
  'class-validator': (body) => pipe.transform(body, meta(SubmitEventDto)),
  compiled: async (body) => submitEventBody.parse(await pipe.transform(body, meta(Object))),
};

/** CPU microseconds per body: best of ROUNDS rounds of PER_ROUND checks (each on a fresh copy, as a parsed request is). */
async function cpuPerBody(check: Check, body: unknown): Promise<number> {
  const text = JSON.stringify(body);
  const copies = Array.from({ length: PER_ROUND }, () => JSON.parse(text) as unknown);
  let best = Infinity;
  for (let r = 0; r < ROUNDS; r++) {
    const fresh = r === 0 ? copies : copies.map(() => JSON.parse(text) as unknown);
    const start = process.cpuUsage();
    for (const c of fresh) {
      await check(c).catch(() => undefined);
    }
    const used = process.cpuUsage(start);
    best = Math.min(best, (used.user + used.system) / PER_ROUND);
  }
  return best;
}

runJsonOnlyBench('events-body', async ({ json }) => {
  const started = performance.now();
  const load = os.loadavg()[0];
  const bodies: Record<string, unknown> = { minimal, typical, 'invalid (2 problems)': invalid };
  const rows: { body: string; class_validator_us: number | null; compiled_us: number | null; ratio: number | null }[] =
    [];
  for (const [name, body] of Object.entries(bodies)) {
    // Warm both paths first (JIT), then measure them back to back.
    await cpuPerBody(checks['class-validator'], body);
    await cpuPerBody(checks.compiled, body);
    const before = await cpuPerBody(checks['class-validator'], body);
    const after = await cpuPerBody(checks.compiled, body);
    rows.push({ body: name, class_validator_us: num(before), compiled_us: num(after), ratio: num(after / before) });
    process.stderr.write(`bench: ${name} done\n`);
  }
  process.stdout.write(
    [
      '# POST /v1/events body check: host CPU per body',
      '',
      markdownTable(
        ['body', 'class-validator (µs)', 'compiled schema (µs)', 'compiled / class-validator'],
        rows.map((r) => [
          r.body,
          fmtNum(r.class_validator_us ?? NaN),
          fmtNum(r.compiled_us ?? NaN),
          fmtNum(r.ratio ?? NaN),
        ]),
      ),
      '',
      machineLine(),
      benchTimeLine(started, load),
      '',
    ].join('\n'),
  );
  if (json) {
    writeJson(json, { bench: 'events-body', rounds: ROUNDS, per_round: PER_ROUND, rows, machine: machineJson() });
  }
  return 0;
});
