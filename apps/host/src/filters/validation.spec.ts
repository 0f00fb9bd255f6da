import 'reflect-metadata';
import { ValidationPipe, type ArgumentMetadata } from '@nestjs/common';
import { Expose, Transform } from 'class-transformer';
import { IsInt, IsOptional } from 'class-validator';
import { DomainError } from '@libs/protocol';
import { CreateAgentDto, CreateApiKeyDto, PageQueryDto } from '../http/dto/admin.dto';
import { TranscriptQueryDto } from '../http/dto/inspection.dto';
import { CreateModelDto } from '../http/dto/models.dto';
import { ListRunsQueryDto, RunEventsQueryDto } from '../http/dto/run.dto';
import { submitEventBody } from '../http/dto/event.schema';
import { sameOwnPrimitives, validationPipe } from './validation';

const pipe = validationPipe();
/** POST /v1/events: the global pipe (JSON limits), then the route's compiled body. */
const SubmitEventDto = Object;
async function through(value: unknown, meta: ArgumentMetadata): Promise<unknown> {
  const v = await pipe.transform(value, meta);
  return meta.metatype === SubmitEventDto ? submitEventBody.parse(v) : v;
}
const body = (metatype: ArgumentMetadata['metatype']): ArgumentMetadata => ({ type: 'body', metatype });
const query = (metatype: ArgumentMetadata['metatype']): ArgumentMetadata => ({ type: 'query', metatype });
const event = (over: Record<string, unknown> = {}, eventOver: Record<string, unknown> = {}) => ({
  agent_id: 'a',
  event: { event_type: 'message.received', source: 'api', ...eventOver },
  input: { text: 'hi' },
  ...over,
});
function nested(levels: number): unknown {
  let v: unknown = 'leaf';
  for (let i = 0; i < levels; i++) {
    v = { k: v };
  }
  return v;
}

async function refusalOf(value: unknown, meta: ArgumentMetadata): Promise<DomainError> {
  try {
    await through(value, meta);
  } catch (e) {
    expect(e).toBeInstanceOf(DomainError);
    return e as DomainError;
  }
  throw new Error('admitted');
}

async function refusal(value: unknown, meta: ArgumentMetadata): Promise<{ field: unknown; message: string }> {
  try {
    await through(value, meta);
  } catch (e) {
    expect(e).toBeInstanceOf(DomainError);
    const d = e as DomainError;
    expect(d.code).toBe('invalid_argument');
    return { field: d.details.field, message: d.message };
  }
  throw new Error('admitted');
}

describe('validation pipe: every refusal is invalid_argument naming the field', () => {
  it.each<[string, unknown, ArgumentMetadata, string, RegExp]>([
    [
      'event without input',
      { agent_id: 'a', event: { event_type: 'message.received', source: 'api' } },
      body(SubmitEventDto),
      'input',
      /input/,
    ],
    ['event without event', { agent_id: 'a', input: {} }, body(SubmitEventDto), 'event', /event/],
    ['NUL in event.data', event({}, { data: { foo: 'x\u0000' } }), body(SubmitEventDto), 'event.data.foo', /NUL/],
    ['NUL in agent_id', event({ agent_id: 'a\u0000' }), body(SubmitEventDto), 'agent_id', /NUL/],
    [
      'lone surrogate in input.text',
      event({ input: { text: '\uDFFF' } }),
      body(SubmitEventDto),
      'input.text',
      /surrogate/,
    ],
    [
      'event_time 1e308',
      event({}, { event_time: 1e308 }),
      body(SubmitEventDto),
      'event.event_time',
      /event_time must not be greater than 253402300799/,
    ],
    [
      'event_time 2^53+1',
      event({}, { event_time: 2 ** 53 + 1 }),
      body(SubmitEventDto),
      'event.event_time',
      /greater than/,
    ],
    ['negative event_time', event({}, { event_time: -1 }), body(SubmitEventDto), 'event.event_time', /less than 0/],
    ['deep event.data (49 levels)', event({}, { data: nested(49) }), body(SubmitEventDto), 'event.data.k', /32 levels/],
    ['20,000-level JSON', event({ metadata: nested(20_000) }), body(SubmitEventDto), 'metadata.k', /32 levels/],
    ['event.data an array', event({}, { data: [1] }), body(SubmitEventDto), 'event.data', /JSON object/],
    [
      'event.data over 256 KiB',
      event({}, { data: { s: 'x'.repeat(300_000) } }),
      body(SubmitEventDto),
      'event.data',
      /262144 bytes/,
    ],
    [
      'max_message_size above int32',
      event({ delivery: { max_message_size: 2 ** 31 } }),
      body(SubmitEventDto),
      'delivery.max_message_size',
      /greater than/,
    ],
    ['runs cursor 1e23', { cursor: '1e23' }, query(ListRunsQueryDto), 'cursor', /cursor/],
    ['runs cursor above int32', { cursor: '2147483648' }, query(ListRunsQueryDto), 'cursor', /2147483647/],
    ['runs cursor with NUL', { cursor: '1\u0000' }, query(ListRunsQueryDto), 'cursor', /NUL/],
    ['events after above int32', { after: '99999999999' }, query(RunEventsQueryDto), 'after', /greater than/],
    ['transcript before of 15 digits', { before: '999999999999999' }, query(TranscriptQueryDto), 'before', /cursor/],
    ['page limit 1e3', { limit: '1000' }, query(PageQueryDto), 'limit', /100/],
    [
      'agent runner_config too deep',
      { agent_id: 'x', runner_id: 'plugin:a/b/c', runner_config: nested(40) },
      body(CreateAgentDto),
      'runner_config.k',
      /32 levels/,
    ],
    [
      'agent policy not an object',
      { agent_id: 'x', runner_id: 'plugin:a/b/c', resource_policy: 'all' },
      body(CreateAgentDto),
      'resource_policy',
      /JSON object/,
    ],
  ])('%s', async (_name, value, meta, field, message) => {
    const r = await refusal(value, meta);
    expect(String(r.field).startsWith(field)).toBe(true);
    expect(r.message).toMatch(message);
    expect(r.message.startsWith(String(r.field))).toBe(true);
  });

  it.each<[string, unknown, ArgumentMetadata]>([
    ['a minimal event', event(), body(SubmitEventDto)],
    [
      'extreme but storable numbers in open maps',
      event({}, { data: { a: 1e308, b: -0, c: 2 ** 53 + 1, d: 1e23 } }),
      body(SubmitEventDto),
    ],
    ['RTL and emoji text', event({ input: { text: '\u202Eabc 😀' } }), body(SubmitEventDto)],
    ['a runs cursor at int32 max', { cursor: '2147483647' }, query(ListRunsQueryDto)],
    ['event.data 30 levels deep (body depth 32)', event({}, { data: nested(29) }), body(SubmitEventDto)],
  ])('admits %s', async (_name, value, meta) => {
    await expect(through(value, meta)).resolves.toBeDefined();
  });

  it('a DTO refusal lists at most 100 problems and counts the others (docs/api.md#validation)', async () => {
    const unknown = Object.fromEntries(Array.from({ length: 130 }, (_, i) => [`q${i}`, '1']));
    try {
      await through(unknown, query(PageQueryDto));
      throw new Error('admitted');
    } catch (e) {
      const d = e as DomainError;
      expect(d.code).toBe('invalid_argument');
      expect(d.details.problems).toHaveLength(100);
      expect((d.details.problems as { field: string }[])[0]).toEqual({
        field: 'q0',
        rule: 'property q0 should not exist',
      });
      expect(d.details.problems_omitted).toBe(30);
      expect(d.message).toMatch(
        /^q0: property q0 should not exist; .*; and 30 more problems \(details\.problems_omitted\)$/,
      );
    }
  });

  it('more unknown keys than a 400 lists: the known keys alone reach class-validator, the answer is the same (docs/api.md#validation)', async () => {
    const validate = jest.spyOn(ValidationPipe.prototype as unknown as { validate: () => unknown }, 'validate');
    try {
      const unknown = Object.fromEntries(Array.from({ length: 50_000 }, (_, i) => [`k${i}`, 0]));
      const d = await refusalOf({ name: '', role: 'root', ...unknown }, body(CreateApiKeyDto));
      const problems = d.details.problems as { field: string; rule: string }[];
      expect(problems).toHaveLength(100);
      expect(problems[0]).toEqual({ field: 'k0', rule: 'property k0 should not exist' });
      expect(problems[99]).toEqual({ field: 'k99', rule: 'property k99 should not exist' });
      // 49,900 unknown keys not listed, and the two known fields' problems (name empty, role not a role).
      expect(d.details.problems_omitted).toBe(49_902);
      expect(d.details.field).toBe('k0');
      expect(d.message).toMatch(
        /^k0: property k0 should not exist; .*k99: property k99 should not exist; and 49902 more problems \(details\.problems_omitted\)$/,
      );
      for (const [object] of validate.mock.calls as unknown as [object][]) {
        expect(Object.keys(object).length).toBeLessThanOrEqual(3);
      }
    } finally {
      validate.mockRestore();
    }
  });

  it('up to 100 unknown keys: class-validator lists them beside the other problems, as before', async () => {
    const unknown = Object.fromEntries(Array.from({ length: 99 }, (_, i) => [`k${i}`, 0]));
    const d = await refusalOf({ name: '', role: 'root', ...unknown }, body(CreateApiKeyDto));
    expect(d.details.problems).toHaveLength(100);
    expect(d.details.problems_omitted).toBe(1); // role
    expect((d.details.problems as { field: string }[])[99]?.field).toBe('name');
  });

  it('an open map reaches its rule as the caller sent it, not a copy of every key (docs/api.md#validation)', async () => {
    const validate = jest.spyOn(ValidationPipe.prototype as unknown as { validate: () => unknown }, 'validate');
    try {
      const runnerConfig: Record<string, unknown> = { a: { b: [1, 'x', null] }, timeout: 30 };
      Object.defineProperty(runnerConfig, 'constructor', { value: 1, enumerable: true, configurable: true });
      const dto = (await through(
        { agent_id: 'a', runner_id: 'r', runner_config: runnerConfig },
        body(CreateAgentDto),
      )) as CreateAgentDto;
      expect(dto).toBeInstanceOf(CreateAgentDto);
      expect(dto.runner_config).toBe(runnerConfig);
      // Nest's pipe strips `constructor` from every nested object; an open map still loses it.
      expect(dto.runner_config).toEqual({ a: { b: [1, 'x', null] }, timeout: 30 });
      const [[validated]] = validate.mock.calls as unknown as [[object]];
      expect(Reflect.get(validated, 'runner_config')).toBe(runnerConfig);
    } finally {
      validate.mockRestore();
    }
  });

  it.each<[string, unknown, string]>([
    [
      'over 256 KiB',
      Object.fromEntries(Array.from({ length: 30_000 }, (_, i) => [`k${i}`, 0])),
      'runner_config: must be at most 262144 bytes of JSON',
    ],
    ['an array', [1], 'runner_config: must be a JSON object'],
    ['a string', '\u0000open map'.slice(1), 'runner_config: must be a JSON object'],
  ])('an open map %s is refused as before', async (_name, runnerConfig, message) => {
    const d = await refusalOf({ agent_id: 'a', runner_id: 'r', runner_config: runnerConfig }, body(CreateAgentDto));
    expect(d.message).toBe(message);
    expect(d.details.field).toBe('runner_config');
  });

  const model = (over: Record<string, unknown> = {}) => ({
    model_id: 'm',
    kind: 'chat',
    base_url: 'http://127.0.0.1:1/v1',
    model_name: 'x',
    ...over,
  });
  const keys = (n: number) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`k${i}`, 0]));
  const validatedBy = async <T>(run: () => Promise<T>): Promise<[T | DomainError, object[]]> => {
    const validate = jest.spyOn(ValidationPipe.prototype as unknown as { validate: () => unknown }, 'validate');
    try {
      const out = await run().catch((e: unknown) => {
        expect(e).toBeInstanceOf(DomainError);
        return e as DomainError;
      });
      return [out, (validate.mock.calls as unknown as [object][]).map(([o]) => o)];
    } finally {
      validate.mockRestore();
    }
  };

  it('an object where a string belongs reaches its rule as the caller sent it, refused as before (docs/api.md#validation)', async () => {
    const big = keys(5_000);
    const [d, validated] = await validatedBy(() =>
      through({ agent_id: big, runner_id: 'r', runner_config: { a: 1 } }, body(CreateAgentDto)),
    );
    expect((d as DomainError).message).toBe(
      'agent_id: agent_id must be shorter than or equal to 128 characters; agent_id: agent_id must be a string',
    );
    // class-validator saw the caller's object, not a copy class-transformer made key by key.
    expect(Reflect.get(validated[0], 'agent_id')).toBe(big);
    expect(Reflect.get(validated[0], 'runner_config')).toEqual({ a: 1 });
  });

  it('a nested DTO with more unknown keys than a 400 lists is refused before class-transformer, the count exact (docs/api.md#validation)', async () => {
    const [d, validated] = await validatedBy(() =>
      through(model({ kind: 'nope', abilities: { vision: true, ...keys(50_000) } }), body(CreateModelDto)),
    );
    const e = d as DomainError;
    const problems = e.details.problems as { field: string; rule: string }[];
    expect(problems).toHaveLength(100);
    expect(problems[0]).toEqual({ field: 'abilities.k0', rule: 'property k0 should not exist' });
    expect(problems[99]).toEqual({ field: 'abilities.k99', rule: 'property k99 should not exist' });
    // 49,900 unknown keys not listed, and `kind`'s problem, found with `abilities` cut to its known keys.
    expect(e.details.problems_omitted).toBe(49_901);
    for (const object of validated) {
      // The instance's own fields only (class fields are defined as undefined): no unknown key.
      expect(Object.keys(Reflect.get(object, 'abilities') as object).every((k) => !k.startsWith('k'))).toBe(true);
    }
  });

  it('a nested DTO with up to 100 unknown keys gets class-validator as before', async () => {
    const d = await refusalOf(model({ abilities: { vision: 'yes', ...keys(3) } }), body(CreateModelDto));
    expect(d.details.problems).toEqual([
      { field: 'abilities.k0', rule: 'property k0 should not exist' },
      { field: 'abilities.k1', rule: 'property k1 should not exist' },
      { field: 'abilities.k2', rule: 'property k2 should not exist' },
      { field: 'abilities.vision', rule: 'vision must be a boolean value' },
    ]);
    const ok = (await through(model({ abilities: { vision: true } }), body(CreateModelDto))) as CreateModelDto;
    expect(ok.abilities).toEqual({ vision: true });
    expect(ok.abilities?.constructor.name).toBe('ModelAbilitiesDto');
  });

  it('an object inside a nested DTO reaches its rule as sent; a property with a transform keeps class-transformer', async () => {
    const big = keys(2_000);
    const [d, validated] = await validatedBy(() =>
      through(model({ abilities: { vision: big } }), body(CreateModelDto)),
    );
    expect((d as DomainError).message).toBe('abilities.vision: vision must be a boolean value');
    expect(Reflect.get(Reflect.get(validated[0], 'abilities') as object, 'vision')).toBe(big);
    // `status` has a @Transform: it still runs (a comma-separated string becomes a list).
    const runs = (await through({ status: 'running,queued' }, query(ListRunsQueryDto))) as ListRunsQueryDto;
    expect(runs.status).toEqual(['running', 'queued']);
    const r = await refusal({ status: { a: 1 } }, query(ListRunsQueryDto));
    expect(r.field).toBe('status');
  });

  it('checks path parameters too', async () => {
    const r = await refusal('ab\u0000', { type: 'param', data: 'agent_id', metatype: String });
    expect(r.field).toBe('agent_id');
  });
});

describe('validation pipe: an empty input', () => {
  it.each<[string, ArgumentMetadata]>([
    ['a stream query', query(RunEventsQueryDto)],
    ['a page query', query(PageQueryDto)],
    ['a transcript query', query(TranscriptQueryDto)],
  ])('of %s is the instance the full pass builds, each time a new one', async (_name, meta) => {
    const full = new ValidationPipe({ transform: true, whitelist: true, forbidNonWhitelisted: true });
    const expected = await full.transform({}, meta);
    const fresh = validationPipe();
    const first = await fresh.transform({}, meta);
    const second = await fresh.transform(Object.create(null), meta);
    const third = await fresh.transform({}, meta);
    for (const got of [first, second, third]) {
      expect(got).toBeInstanceOf(meta.metatype as new () => unknown);
      expect(got).toEqual(expected);
      expect(Reflect.ownKeys(got as object)).toEqual(Reflect.ownKeys(expected as object));
    }
    expect(second).not.toBe(first);
    expect(third).not.toBe(second);
  });

  it("of a class whose transform fills an absent key keeps class-transformer's instance, every time", async () => {
    class Defaulted {
      @Expose()
      @Transform(({ value }: { value: unknown }) => value ?? 20)
      @IsOptional()
      @IsInt()
      limit?: number;
    }
    const fresh = validationPipe();
    for (let i = 0; i < 3; i++) {
      const got = await fresh.transform({}, query(Defaulted));
      expect(got).toBeInstanceOf(Defaulted);
      expect((got as Defaulted).limit).toBe(20);
    }
  });

  it('of a class with a required field is refused as before, every time', async () => {
    const fresh = validationPipe();
    const a = await fresh.transform({}, body(CreateAgentDto)).catch((e: unknown) => e);
    const b = await fresh.transform({}, body(CreateAgentDto)).catch((e: unknown) => e);
    expect(a).toBeInstanceOf(DomainError);
    expect((a as DomainError).details.field).toBe('agent_id');
    expect((b as DomainError).message).toBe((a as DomainError).message);
  });

  it('with a key still gets the full rules after an empty one passed', async () => {
    const fresh = validationPipe();
    await fresh.transform({}, query(RunEventsQueryDto));
    const r = await fresh.transform({ after: '-1' }, query(RunEventsQueryDto)).catch((e: unknown) => e);
    expect((r as DomainError).details.field).toBe('after');
  });
});

describe('sameOwnPrimitives', () => {
  class A {
    x?: number = 1;
  }
  it('is true for the same prototype, keys and primitive values', () => {
    expect(sameOwnPrimitives(new A(), new A())).toBe(true);
  });
  it('is false for another value, another key, an object value or another prototype', () => {
    expect(sameOwnPrimitives(new A(), Object.assign(new A(), { x: 2 }))).toBe(false);
    expect(sameOwnPrimitives(new A(), Object.assign(new A(), { y: 1 }))).toBe(false);
    expect(sameOwnPrimitives(Object.assign(new A(), { x: {} }), Object.assign(new A(), { x: {} }))).toBe(false);
    expect(sameOwnPrimitives(new A(), { x: 1 })).toBe(false);
  });
});
