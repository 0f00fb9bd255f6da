import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { Host, TestDatabase } from './harness';

/*
 * Issue 23 item 4d: an MCP server listing many tools, on whichever database the e2e run selected
 * (E2E_DATABASE=postgres for PostgreSQL). The real stdio fixture server lists its 9 own tools and
 * the extra ones named in a file.
 */

jest.setTimeout(120_000);

const MCP_STDIO_ARGS = [
  '-r',
  require.resolve('ts-node/register/transpile-only'),
  path.join(__dirname, 'fixtures', 'mcp-stdio-server.ts'),
];
/** The fixture server's own tools (fixtures/mcp-stdio-server.ts), listed before its generated ones. */
const FIXTURE_OWN_TOOLS = 11;
const CAP = 1000;

describe('an MCP source with many tools', () => {
  const db = new TestDatabase();
  const host = new Host(db);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rh-many-tools-'));

  beforeAll(async () => {
    await host.start();
  });

  afterAll(async () => {
    await host.stop();
    await db.drop();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  const addSource = async (sourceId: string, extraTools: number) => {
    const file = path.join(dir, sourceId);
    fs.writeFileSync(file, Array.from({ length: extraTools }, (_, i) => `${sourceId}_t${i}`).join('\n'));
    return host.api('POST', '/v1/admin/tools/sources', {
      source_id: sourceId,
      kind: 'mcp_stdio',
      config: {
        command: process.execPath,
        args: [...MCP_STDIO_ARGS, `--extra-tools-file=${file}`],
        timeout_ms: 20_000,
      },
    });
  };

  it('stores every tool up to the cap (999 and more, past the old SQLite failure)', async () => {
    const r = await addSource('wide', CAP - FIXTURE_OWN_TOOLS);
    expect(r.status).toBe(201);
    expect(r.body).toMatchObject({ status: 'connected', last_error: null, skipped_tools: [] });
    expect(r.body.tools).toHaveLength(CAP);
    expect(r.body.tools).toEqual(expect.arrayContaining(['add', 'wide_t0', `wide_t${CAP - FIXTURE_OWN_TOOLS - 1}`]));
    // The stored listing is what the catalogue serves, and a refresh stores it again in place.
    const refreshed = await host.api('POST', '/v1/admin/tools/sources/wide/refresh');
    expect(refreshed.body.tools).toHaveLength(CAP);
    const catalogue = await host.api<{ source_id: string | null }[]>('GET', '/v1/admin/tools');
    expect(catalogue.status).toBe(200);
    expect(catalogue.body.filter((t) => t.source_id === 'wide')).toHaveLength(CAP);
  });

  it('keeps the first 1,000 of 1,511 tools and names each one left out, and why', async () => {
    const r = await addSource('huge', 1500);
    expect(r.status).toBe(201);
    expect(r.body).toMatchObject({ status: 'connected', last_error: null });
    // Names held by the source registered first get the prefixed form: still 1,000 kept.
    expect(r.body.tools).toHaveLength(CAP);
    expect(r.body.tools).toEqual(expect.arrayContaining(['huge__add', 'huge_t0']));
    const skipped = r.body.skipped_tools as { name: string; reason: string }[];
    expect(skipped).toHaveLength(1500 + FIXTURE_OWN_TOOLS - CAP);
    expect(skipped[0]).toEqual({
      name: `huge_t${CAP - FIXTURE_OWN_TOOLS}`,
      reason: 'the source lists more than 1000 tools; its first 1000 are kept',
    });
    expect(skipped.at(-1)!.name).toBe('huge_t1499');
    expect((await host.api('GET', '/v1/admin/tools/sources/huge')).body.skipped_tools).toHaveLength(skipped.length);
  });
});
