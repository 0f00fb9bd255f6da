import 'reflect-metadata';
import * as os from 'node:os';
import * as path from 'node:path';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import type { ArgumentMetadata } from '@nestjs/common';
import { validationPipe } from '../../apps/host/src/filters/validation';
import { submitEventBody } from '../../apps/host/src/http/dto/event.schema';
import { CreateAgentDto, CreateApiKeyDto } from '../../apps/host/src/http/dto/admin.dto';
import { CreateModelDto } from '../../apps/host/src/http/dto/models.dto';
import { resourcePolicySchema } from '../../libs/agents/src/policies';
import { describeIssues } from '../../libs/protocol/src/zod-issues';
import { runMain, UsageError } from '../common/cli';
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
 * the machine is shared: read the ratio, not the microseconds. A refused body's time includes
 * its 400 answer's JSON (the host writes it). The two bodies of ~50,000 values (a valid one, its
 * values in open maps, and one of 49,990 unknown keys) are checked 10 times a round, by the
 * compiled schema only; `--base DIR` measures every body through DIR's build too (another
 * checkout's dist/, e.g. /work/base), alternated with this one's.
 *
 * `--admin` measures the DTO routes instead (round 9): the same pipe on an admin body (class-transformer
 * and class-validator) and an agent policy's zod check with its refusal's sentence, on the bodies a
 * caller can size — 49,990 unknown keys, an open map of 20,000 keys, a policy of 20,000 unknown keys,
 * and (round 10) an object of 49,990 keys where a string belongs and a nested DTO (a model's
 * `abilities`) of 49,990 unknown keys — 2 bodies a round; the time of one is the event loop's longest block for it (the check is
 * synchronous but for one await).
 *
 *   npm run bench:events-body -- [--base DIR] [--admin] [--json FILE]   (builds, then runs dist/bench/events-body/main.js)
 */

const ROUNDS = 5;
const PER_ROUND = 2_000;
const PER_ROUND_LARGE = 10;
const PER_ROUND_ADMIN = 2;
const USAGE = `usage: node dist/bench/events-body/main.js [--base DIR] [--admin] [--json FILE]
  --base DIR    also measure the compiled schema of DIR's build (DIR/dist), alternated with this one
  --admin       the DTO routes' bodies instead (admin DTOs through the pipe, an agent policy's zod check)
  --json FILE   also write the figures as JSON to FILE
  -h, --help    this text`;

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

/** `n` keys `k0`, `k1`, … with the value 0. */
const keys = (n: number, from = 0): Record<string, number> =>
  Object.fromEntries(Array.from({ length: n }, (_, i) => [`k${from + i}`, 0]));
/** 49,990 values in three open maps (each under its 256 KiB), within the 50,000 values of a body. */
const largeValid = {
  ...minimal,
  event: { ...minimal.event, data: keys(16_664) },
  actor: { actor_type: 'user', metadata: keys(16_663, 16_664) },
  metadata: keys(16_663, 33_327),
};
/** The finding F4 body: 49,990 unknown keys, each a problem. */
const largeInvalid = { ...minimal, ...keys(49_990) };

type Check = (body: unknown) => Promise<unknown>;

interface Build {
  validationPipe: typeof validationPipe;
  submitEventBody: Pick<typeof submitEventBody, 'parse'>;
  CreateAgentDto: typeof CreateAgentDto;
  CreateApiKeyDto: typeof CreateApiKeyDto;
  CreateModelDto: typeof CreateModelDto;
  resourcePolicySchema: Pick<typeof resourcePolicySchema, 'safeParse'>;
  describeIssues: typeof describeIssues;
}

const thisBuild: Build = {
  validationPipe,
  submitEventBody,
  CreateAgentDto,
  CreateApiKeyDto,
  CreateModelDto,
  resourcePolicySchema,
  describeIssues,
};

/** The admin bodies a caller can size, each with the check its route runs. */
function adminChecks(build: Build): [string, unknown, Check][] {
  const pipe = build.validationPipe();
  const dto =
    (metatype: ArgumentMetadata['metatype']): Check =>
    (body) =>
      pipe.transform(body, meta(metatype));
  const policy: Check = (body) => {
    const r = build.resourcePolicySchema.safeParse(body);
    return Promise.resolve(r.success ? r.data : build.describeIssues(r.error, 'resource_policy'));
  };
  return [
    [
      'api key, 49,990 unknown keys',
      { name: 'k', role: 'admin', ...keys(49_990) },
      answered(dto(build.CreateApiKeyDto)),
    ],
    [
      'agent, runner_config of 20,000 keys (valid)',
      { agent_id: 'a', runner_id: 'r', runner_config: keys(20_000) },
      answered(dto(build.CreateAgentDto)),
    ],
    [
      'agent, runner_config of 40,000 keys (over 256 KiB)',
      { agent_id: 'a', runner_id: 'r', runner_config: keys(40_000) },
      answered(dto(build.CreateAgentDto)),
    ],
    [
      'agent, agent_id an object of 49,990 keys',
      { agent_id: keys(49_990), runner_id: 'r' },
      answered(dto(build.CreateAgentDto)),
    ],
    [
      'model, abilities of 49,990 unknown keys',
      { model_id: 'm', kind: 'chat', base_url: 'http://127.0.0.1:1/v1', model_name: 'x', abilities: keys(49_990) },
      answered(dto(build.CreateModelDto)),
    ],
    ['resource_policy, 20,000 unknown keys (zod)', keys(20_000), policy],
  ];
}

const meta = (metatype: ArgumentMetadata['metatype']): ArgumentMetadata => ({ type: 'body', metatype });

/** A refused body costs its 400 answer too: the error body's JSON, as the host writes it. */
function answered(check: Check): Check {
  return (body) =>
    check(body).catch((e: { code?: string; message?: string; details?: unknown }) =>
      JSON.stringify({ error: { code: e.code, message: e.message, retryable: false, details: e.details } }),
    );
}

function compiledCheck(build: Build): Check {
  const pipe = build.validationPipe();
  return answered(async (body) => build.submitEventBody.parse(await pipe.transform(body, meta(Object))));
}

/** CPU microseconds per body: best of ROUNDS rounds of `perRound` checks (each on a fresh copy, as a parsed request is). */
async function cpuPerBody(check: Check, body: unknown, perRound: number): Promise<number> {
  const text = JSON.stringify(body);
  let best = Infinity;
  for (let r = 0; r < ROUNDS; r++) {
    const fresh = Array.from({ length: perRound }, () => JSON.parse(text) as unknown);
    const start = process.cpuUsage();
    for (const c of fresh) {
      await check(c);
    }
    const used = process.cpuUsage(start);
    best = Math.min(best, (used.user + used.system) / perRound);
  }
  return best;
}

function loadBuild(dir: string): Build {
  const dist = path.resolve(dir, 'dist', 'apps', 'host', 'src');
  /* eslint-disable @typescript-eslint/no-require-imports -- another build's modules, by path */
  const validation = require(path.join(dist, 'filters', 'validation.js')) as Pick<Build, 'validationPipe'>;
  const schema = require(path.join(dist, 'http', 'dto', 'event.schema.js')) as Pick<Build, 'submitEventBody'>;
  const admin = require(path.join(dist, 'http', 'dto', 'admin.dto.js')) as Pick<
    Build,
    'CreateAgentDto' | 'CreateApiKeyDto'
  >;
  const models = require(path.join(dist, 'http', 'dto', 'models.dto.js')) as Pick<Build, 'CreateModelDto'>;
  const libs = path.resolve(dir, 'dist', 'libs');
  const policies = require(path.join(libs, 'agents', 'src', 'policies.js')) as Pick<Build, 'resourcePolicySchema'>;
  const issues = require(path.join(libs, 'protocol', 'src', 'zod-issues.js')) as Pick<Build, 'describeIssues'>;
  /* eslint-enable @typescript-eslint/no-require-imports */
  return {
    validationPipe: validation.validationPipe,
    submitEventBody: schema.submitEventBody,
    CreateAgentDto: admin.CreateAgentDto,
    CreateApiKeyDto: admin.CreateApiKeyDto,
    CreateModelDto: models.CreateModelDto,
    resourcePolicySchema: policies.resourcePolicySchema,
    describeIssues: issues.describeIssues,
  };
}

function parseOptions(argv: string[]): { base: string | null; admin: boolean; json: string | null } | 'help' {
  try {
    const { values } = parseArgs({
      args: argv,
      strict: true,
      allowPositionals: false,
      options: {
        base: { type: 'string' },
        admin: { type: 'boolean' },
        json: { type: 'string' },
        help: { type: 'boolean', short: 'h' },
      },
    });
    return values.help
      ? 'help'
      : { base: values.base ?? null, admin: values.admin ?? false, json: values.json ?? null };
  } catch (e) {
    throw new UsageError(e instanceof Error ? e.message : String(e));
  }
}

interface Row {
  body: string;
  class_validator_us: number | null;
  compiled_us: number | null;
  ratio: number | null;
  base_compiled_us: number | null;
}

async function main(): Promise<number> {
  const opts = parseOptions(process.argv.slice(2));
  if (opts === 'help') {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  const started = performance.now();
  const load = os.loadavg()[0];
  if (opts.admin) {
    return adminMain(opts, started, load);
  }
  const classValidatorPipe = validationPipe();
  const classValidator = answered((body) => classValidatorPipe.transform(body, meta(SubmitEventDto)));
  const compiled = compiledCheck(thisBuild);
  const base = opts.base ? compiledCheck(loadBuild(opts.base)) : null;
  const bodies: [string, unknown, number][] = [
    ['minimal', minimal, PER_ROUND],
    ['typical', typical, PER_ROUND],
    ['invalid (2 problems)', invalid, PER_ROUND],
    ['valid, 49,990 values in open maps', largeValid, PER_ROUND_LARGE],
    ['49,990 unknown keys (49,990 problems)', largeInvalid, PER_ROUND_LARGE],
  ];
  const rows: Row[] = [];
  for (const [name, body, perRound] of bodies) {
    const large = perRound === PER_ROUND_LARGE;
    // Warm every path first (JIT), then measure them back to back (base and this build alternated).
    for (const check of [large ? null : classValidator, compiled, base]) {
      if (check) {
        await cpuPerBody(check, body, perRound);
      }
    }
    const before = large ? NaN : await cpuPerBody(classValidator, body, perRound);
    const baseFirst = base ? await cpuPerBody(base, body, perRound) : NaN;
    const after = await cpuPerBody(compiled, body, perRound);
    const baseSecond = base ? await cpuPerBody(base, body, perRound) : NaN;
    rows.push({
      body: name,
      class_validator_us: num(before),
      compiled_us: num(after),
      ratio: num(after / before),
      base_compiled_us: num(Math.min(baseFirst, baseSecond)),
    });
    process.stderr.write(`bench: ${name} done\n`);
  }
  process.stdout.write(
    [
      '# POST /v1/events body check: host CPU per body',
      '',
      markdownTable(
        [
          'body',
          'class-validator (µs)',
          'compiled schema (µs)',
          'compiled / class-validator',
          ...(base ? [`compiled, ${opts.base} (µs)`] : []),
        ],
        rows.map((r) => [
          r.body,
          fmtNum(r.class_validator_us ?? NaN),
          fmtNum(r.compiled_us ?? NaN),
          fmtNum(r.ratio ?? NaN),
          ...(base ? [fmtNum(r.base_compiled_us ?? NaN)] : []),
        ]),
      ),
      '',
      machineLine(),
      benchTimeLine(started, load),
      '',
    ].join('\n'),
  );
  if (opts.json) {
    writeJson(opts.json, {
      bench: 'events-body',
      rounds: ROUNDS,
      per_round: PER_ROUND,
      per_round_large: PER_ROUND_LARGE,
      base: opts.base,
      rows,
      machine: machineJson(),
    });
  }
  return 0;
}

interface AdminRow {
  body: string;
  ms: number | null;
  base_ms: number | null;
  load: number;
}

/** `--admin`: CPU milliseconds per admin body, this build between two rounds of the base build. */
async function adminMain(
  opts: { base: string | null; json: string | null },
  started: number,
  load: number,
): Promise<number> {
  const mine = adminChecks(thisBuild);
  const base = opts.base ? adminChecks(loadBuild(opts.base)) : null;
  const rows: AdminRow[] = [];
  for (const [i, [name, body, check]] of mine.entries()) {
    const baseCheck = base?.[i]?.[2] ?? null;
    for (const c of [check, baseCheck]) {
      if (c) {
        await cpuPerBody(c, body, 1);
      }
    }
    const baseFirst = baseCheck ? await cpuPerBody(baseCheck, body, PER_ROUND_ADMIN) : NaN;
    const after = await cpuPerBody(check, body, PER_ROUND_ADMIN);
    const baseSecond = baseCheck ? await cpuPerBody(baseCheck, body, PER_ROUND_ADMIN) : NaN;
    rows.push({
      body: name,
      ms: num(after / 1000),
      base_ms: num(Math.min(baseFirst, baseSecond) / 1000),
      load: os.loadavg()[0],
    });
    process.stderr.write(`bench: ${name} done\n`);
  }
  process.stdout.write(
    [
      '# DTO routes: host CPU per admin body (ms), one body is one event-loop block',
      '',
      markdownTable(
        ['body', 'this build (ms)', ...(base ? [`${opts.base} (ms)`] : []), '1-min load'],
        rows.map((r) => [r.body, fmtNum(r.ms ?? NaN), ...(base ? [fmtNum(r.base_ms ?? NaN)] : []), fmtNum(r.load)]),
      ),
      '',
      machineLine(),
      benchTimeLine(started, load),
      '',
    ].join('\n'),
  );
  if (opts.json) {
    writeJson(opts.json, {
      bench: 'events-body',
      mode: 'admin',
      rounds: ROUNDS,
      per_round: PER_ROUND_ADMIN,
      base: opts.base,
      rows,
      machine: machineJson(),
    });
  }
  return 0;
}

runMain(main, USAGE);
