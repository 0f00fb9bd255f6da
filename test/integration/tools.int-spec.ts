import type { TestingModule } from '@nestjs/testing';
import type { GrantedTool } from '@libs/authz';
import { APP_CONFIG, secretEnvPolicy } from '@libs/config';
import { ToolsRepository, Transactions } from '@libs/persistence';
import { DomainError } from '@libs/protocol';
import { ToolSourcesService, ToolsService, ElicitationBroker } from '@libs/resources';
import { McpClientPool } from '../../libs/resources/src/tools/mcp-client-pool';
import { ToolRegistryService } from '../../libs/resources/src/tools/tool-registry.service';
import { DIALECTS, type TestDatabase, storesModule } from './support/databases';

jest.setTimeout(120_000);

/** An HTTP source offering the given tool names (nothing is called: listing needs no network). */
const httpSource = (...names: string[]) => ({
  kind: 'http',
  config: { tools: names.map((name) => ({ name, url: `http://127.0.0.1:9/${name}` })) },
});

const granted = (tool_name: string, source: string, source_id: string | null): GrantedTool => ({
  tool_name,
  tool_type: source,
  description: '',
  operations: ['detail', 'call'],
  parameters: null,
  source,
  source_id,
});

describe.each(DIALECTS)('tool registry on %s', (_name, factory) => {
  let db: TestDatabase;
  let moduleRef: TestingModule;
  let sources: ToolSourcesService;
  let tools: ToolsService;
  let repo: ToolsRepository;

  beforeAll(async () => {
    db = await factory();
    moduleRef = await storesModule(db, [
      Transactions,
      ToolsRepository,
      McpClientPool,
      ElicitationBroker,
      ToolRegistryService,
      ToolSourcesService,
      ToolsService,
      {
        provide: APP_CONFIG,
        useValue: {
          tools: { callTimeoutMs: 1000, maxResultBytes: 65536, mcpConnectTimeoutMs: 2000 },
          secretEnv: secretEnvPolicy(['*']),
          secret: (name: string) => process.env[name] ?? null,
        },
      },
    ]);
    sources = moduleRef.get(ToolSourcesService);
    tools = moduleRef.get(ToolsService);
    repo = moduleRef.get(ToolsRepository);
  });

  afterAll(async () => {
    await moduleRef?.close();
    await db?.dispose();
  });

  const names = async () => (await tools.catalog()).map((t) => `${t.source}:${t.source_id}:${t.tool_name}`).sort();

  it('names colliding tools: the first listed keeps the name, concurrent listings never pick the same one', async () => {
    expect(await names()).toEqual(['builtin:null:current_time']);
    await sources.create('first', httpSource('lookup', 'http_fetch'));
    await Promise.all(['a', 'b', 'c'].map((id) => sources.create(id, httpSource('lookup'))));
    expect(await names()).toEqual([
      'builtin:null:current_time',
      'http:a:a__lookup',
      'http:b:b__lookup',
      'http:c:c__lookup',
      'http:first:first__http_fetch',
      'http:first:lookup',
    ]);
    expect((await repo.tools()).find((t) => t.tool_name === 'first__http_fetch')?.source_tool_name).toBe('http_fetch');
  });

  it('frees a name with its source, and resolves only the frozen source', async () => {
    const frozen = granted('lookup', 'http', 'first');
    expect((await tools.detail({} as never, frozen)).name).toBe('lookup');
    await sources.remove('first');
    await sources.refresh('b');
    expect((await sources.get('b')).tools).toEqual(['lookup']);
    const e = await tools.detail({} as never, frozen).catch((err: unknown) => err);
    expect(e).toBeInstanceOf(DomainError);
    expect((e as DomainError).code).toBe('not_found');
    expect((await tools.detail({} as never, granted('lookup', 'http', 'b'))).name).toBe('lookup');
  });

  it('disabling a source takes its tools out of the catalogue; built-ins switch on and off', async () => {
    const off = await sources.replace('c', { ...httpSource('lookup'), enabled: false });
    expect(off).toMatchObject({ status: 'disabled', tools: [] });
    expect(await names()).not.toContain('http:c:c__lookup');
    const on = await sources.replace('c', httpSource('lookup', 'extra'));
    expect(on).toMatchObject({ status: 'ready', tools: ['c__lookup', 'extra'] });

    await sources.setBuiltin('http_fetch', true);
    await sources.setBuiltin('current_time', false);
    expect((await names()).filter((n) => n.startsWith('builtin'))).toEqual(['builtin:null:http_fetch']);
    expect((await repo.source('builtin'))?.config).toEqual({ enabled: ['http_fetch'] });
    expect((await sources.list()).map((s) => s.source_id).sort()).toEqual(['a', 'b', 'c']);
  });
});
