import 'reflect-metadata';
import type { ArgumentMetadata } from '@nestjs/common';
import { DomainError } from '@libs/protocol';
import { validationPipe } from '../../filters/validation';
import { ReplaceAgentDto } from './admin.dto';
import { ReplaceModelDto } from './models.dto';
import { SetBuiltinToolDto, ToolSourceBodyDto } from './tools.dto';
import { UpdateWorkspaceDto } from './workspace.dto';

const pipe = validationPipe();
const body = (metatype: ArgumentMetadata['metatype']): ArgumentMetadata => ({ type: 'body', metatype });

async function refused(value: unknown, metatype: ArgumentMetadata['metatype']): Promise<DomainError> {
  const e = await pipe.transform(value, body(metatype)).then(
    () => undefined,
    (x: unknown) => x,
  );
  expect(e).toBeInstanceOf(DomainError);
  return e as DomainError;
}

/** docs/api.md, "null in admin bodies": the rule for every admin PUT body. */
describe('null in admin PUT bodies', () => {
  it('an optional field whose null has no meaning of its own reads it as absent (agent version, workspace name)', async () => {
    const agent = (await pipe.transform(
      { runner_id: 'builtin:local-agent/default', version: null },
      body(ReplaceAgentDto),
    )) as ReplaceAgentDto;
    expect(agent.version).toBeUndefined();
    const ws = (await pipe.transform({ name: null, quotas: { max_active_runs: 2 } }, body(UpdateWorkspaceDto))) as
      UpdateWorkspaceDto | undefined;
    expect(ws?.name).toBeUndefined();
    expect(ws?.quotas).toEqual({ max_active_runs: 2 });
  });

  it('a workspace PUT keeps quotas: null (it clears every quota, docs/api.md), not absent', async () => {
    const ws = (await pipe.transform({ quotas: null }, body(UpdateWorkspaceDto))) as UpdateWorkspaceDto;
    expect(ws.quotas).toBeNull();
  });

  it('a given version or name still gets its rules', async () => {
    expect((await refused({ runner_id: 'r', version: 0 }, ReplaceAgentDto)).details).toMatchObject({
      field: 'version',
    });
    expect((await refused({ name: 7 }, UpdateWorkspaceDto)).details).toMatchObject({ field: 'name' });
  });

  it.each([
    ['agent', ReplaceAgentDto, { runner_id: null }, 'runner_id'],
    ['model', ReplaceModelDto, { kind: null, base_url: 'http://m/v1', model_name: 'x' }, 'kind'],
    ['model', ReplaceModelDto, { kind: 'chat', base_url: null, model_name: 'x' }, 'base_url'],
    ['model', ReplaceModelDto, { kind: 'chat', base_url: 'http://m/v1', model_name: null }, 'model_name'],
    ['tool source', ToolSourceBodyDto, { kind: null, config: {} }, 'kind'],
    ['tool source', ToolSourceBodyDto, { kind: 'http', config: null }, 'config'],
    ['builtin tool', SetBuiltinToolDto, { enabled: null }, 'enabled'],
  ])('a required field of the %s PUT refuses null with 400 naming it and its rule', async (_, dto, value, field) => {
    const e = await refused(value, dto);
    expect(e.code).toBe('invalid_argument');
    expect(e.details).toMatchObject({ field });
    expect(e.message.startsWith(`${field}: `)).toBe(true);
  });
});
