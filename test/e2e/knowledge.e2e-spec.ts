import * as grpc from '@grpc/grpc-js';
import { ADMIN_KEY, Host, TestDatabase, event } from './harness';
import { HostApiClient, type RpcResult } from './host-api-client';
import { RawPlugin, manifestFor } from './raw-plugin';

/*
 * Knowledge bases end to end: the admin API (bases, JSON and raw-text documents, search), agent
 * validation of allowed_kb_ids, and RetrieveKnowledge over real gRPC from a hand-driven runner
 * plugin whose manifest asks for knowledge retrieval: granted, refused and audited, bad input.
 */

jest.setTimeout(120_000);

const S = grpc.status;
const KB = '/v1/admin/knowledge-bases';
const MANUAL = [
  '# Installation',
  'Download the installer from the portal and run it as administrator.',
  '',
  '## Linux',
  'On Linux use the tarball: extract it and run the setup script.',
  '',
  '# Troubleshooting',
  'If the service does not start, check the log file and the firewall rules.',
].join('\n');

interface AuditRow {
  action: string;
  resource: string | null;
  outcome: string;
  error_code: string | null;
}

function ok<T>(r: RpcResult<T>): T {
  if (r.err) {
    throw new Error(`expected success, got ${S[r.err.code]} (${r.err.xcode}): ${r.err.details}`);
  }
  return r.res;
}

function expectError(r: RpcResult<unknown>, code: grpc.status, xcode: string): void {
  const got = r.err ? { code: S[r.err.code], xcode: r.err.xcode } : { res: r.res };
  expect(got).toEqual({ code: S[code], xcode });
}

describe('knowledge bases end to end', () => {
  const db = new TestDatabase();
  const host = new Host(db, { HOSTAPI_CALLS_PER_SECOND: '1000', HOSTAPI_BURST: '1000' });
  let plugin: RawPlugin;
  let api: HostApiClient;
  let runId: string;
  const docs: Record<string, string> = {};

  const audit = async (id: string): Promise<AuditRow[]> =>
    (await host.api<{ items: AuditRow[] }>('GET', `/v1/admin/runs/${id}/audit?limit=100`)).body.items;
  const retrieve = (req: Record<string, unknown>) =>
    api.call('RetrieveKnowledge', { run_id: runId, kb_id: 'manual', query_text: 'installer', ...req });

  beforeAll(async () => {
    await host.start();
    const token = (await host.api('POST', '/v1/admin/plugins', { author: 'kb', name: 'raw' })).body.token as string;
    plugin = new RawPlugin(host.grpc, token);
    plugin.hello('kb', 'raw', [
      manifestFor('kb', 'raw', {
        capabilities: { streaming: true, knowledge_retrieval: true },
        permissions: { knowledge_bases: ['retrieve'] },
      }),
    ]);
    expect((await plugin.next()).welcome.runners).toHaveLength(1);
    api = new HostApiClient(host.grpc, token);
  });

  afterAll(async () => {
    api?.close();
    plugin?.close();
    await host.stop();
    await db.drop();
  });

  it('creates knowledge bases and refuses duplicates and bad settings', async () => {
    const created = await host.api('POST', KB, { kb_id: 'manual', name: 'Manual', chunk_size: 200, chunk_overlap: 40 });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({
      kb_id: 'manual',
      kb_type: 'fulltext',
      chunk_size: 200,
      chunk_overlap: 40,
      document_count: 0,
    });
    expect((await host.api('POST', KB, { kb_id: 'secret', name: 'Secret' })).body).toMatchObject({
      chunk_size: 1000,
      chunk_overlap: 150,
    });
    expect((await host.api('POST', KB, { kb_id: 'manual', name: 'again' })).status).toBe(409);
    for (const body of [
      { kb_id: 'x', name: 'x', chunk_size: 200, chunk_overlap: 150 },
      { kb_id: 'x', name: 'x', chunk_size: 50 },
      { kb_id: 'x y', name: 'x' },
      { kb_id: 'x', name: 'x', unknown: 1 },
      { kb_id: 'x' },
    ]) {
      const r = await host.api('POST', KB, body);
      expect({ status: r.status, code: r.body.error.code }).toEqual({ status: 400, code: 'invalid_argument' });
    }
    expect((await host.api('GET', `${KB}/x`)).status).toBe(404);
  });

  it('takes documents as JSON or raw text, within the size limit', async () => {
    const md = await host.api('POST', `${KB}/manual/documents`, {
      name: 'manual.md',
      content_type: 'text/markdown',
      content: MANUAL,
      metadata: { product: 'agent', version: 2 },
    });
    expect(md.status).toBe(201);
    expect(md.body).toMatchObject({ name: 'manual.md', size: Buffer.byteLength(MANUAL), chunk_count: 3 });
    docs.manual = md.body.document_id;

    const raw = async (type: string, body: string, query = '?name=faq.txt') => {
      const res = await fetch(`${host.http}${KB}/manual/documents${query}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${ADMIN_KEY}`, 'content-type': type },
        body,
      });
      return { status: res.status, body: (await res.json()) as any };
    };
    const faq = await raw('text/plain; charset=utf-8', 'The installer needs 2 GB of free disk space. Grüße!');
    expect(faq.status).toBe(201);
    expect(faq.body).toMatchObject({ name: 'faq.txt', content_type: 'text/plain', metadata: {}, chunk_count: 1 });
    docs.faq = faq.body.document_id;
    const notes = await raw('text/markdown', '# Notes\nThe installer is signed.', '?name=notes.md');
    expect(notes.body).toMatchObject({ content_type: 'text/markdown', chunk_count: 1 });
    docs.notes = notes.body.document_id;

    expect((await raw('text/plain', 'no name', '')).status).toBe(400);
    expect((await raw('text/plain; charset=latin1', 'x')).status).toBe(400);
    expect((await raw('text/html', '<p>html</p>')).status).toBe(400);
    const tooBig = await raw('text/plain', 'x'.repeat(5 * 1024 * 1024 + 1));
    expect({ status: tooBig.status, code: tooBig.body.error.code }).toEqual({ status: 413, code: 'payload_too_large' });
    const bad = await host.api('POST', `${KB}/manual/documents`, {
      name: 'bad',
      content_type: 'text/plain',
      content: 'x',
      metadata: { document_id: 'forged' },
    });
    expect({ status: bad.status, field: bad.body.error.details.field }).toEqual({
      status: 400,
      field: 'metadata.document_id',
    });
    expect(
      (await host.api('POST', `${KB}/nope/documents`, { name: 'a', content_type: 'text/plain', content: 'a' })).status,
    ).toBe(404);

    expect((await host.api('GET', `${KB}/manual`)).body).toMatchObject({ document_count: 3, chunk_count: 5 });
    const list = await host.api('GET', `${KB}/manual/documents?limit=2`);
    expect(list.body.items.map((d: any) => d.name)).toEqual(['manual.md', 'faq.txt']);
    const next = await host.api('GET', `${KB}/manual/documents?cursor=${list.body.next_cursor}`);
    expect(next.body).toMatchObject({ items: [{ name: 'notes.md' }], next_cursor: null });
    expect((await host.api('GET', `${KB}/manual/documents/${docs.faq}`)).body.size).toBe(
      Buffer.byteLength('The installer needs 2 GB of free disk space. Grüße!'),
    );
    const kbs = await host.api('GET', KB);
    expect(kbs.body.items.map((k: any) => [k.kb_id, k.document_count])).toEqual([
      ['manual', 3],
      ['secret', 0],
    ]);
  });

  it('searches from the admin API, best first', async () => {
    const r = await host.api('POST', `${KB}/manual/search`, { query_text: 'linux tarball setup', top_k: 2 });
    expect(r.status).toBe(200);
    expect(r.body.results).toHaveLength(1);
    expect(r.body.results[0]).toMatchObject({
      content: [{ type: 'text', text: expect.stringContaining('tarball') }],
      metadata: { heading: 'Linux', document_id: docs.manual, product: 'agent', version: 2 },
    });
    expect((await host.api('POST', `${KB}/manual/search`, { query_text: '' })).status).toBe(400);
  });

  it('validates allowed_kb_ids when an agent is created', async () => {
    const r = await host.api('POST', '/v1/admin/agents', {
      agent_id: 'bad',
      runner_id: 'plugin:kb/raw/default',
      resource_policy: { allowed_kb_ids: ['manual', 'missing'] },
    });
    expect(r.status).toBe(400);
    expect(r.body.error).toMatchObject({
      code: 'invalid_argument',
      details: { field: 'resource_policy.allowed_kb_ids[1]' },
    });
    const agent = await host.api('POST', '/v1/admin/agents', {
      agent_id: 'reader',
      runner_id: 'plugin:kb/raw/default',
      resource_policy: { allowed_kb_ids: ['manual'] },
    });
    expect(agent.status).toBe(201);
  });

  it('grants the knowledge base to the run and serves RetrieveKnowledge over gRPC', async () => {
    const posted = await host.api('POST', '/v1/events', event('reader', 'how do I install?'));
    expect(posted.status).toBe(202);
    runId = posted.body.run_id;
    const runContext = (await plugin.next()).run.context;
    expect(runContext.run_id).toBe(runId);
    expect(runContext.resources.knowledge_bases).toEqual([
      { kb_id: 'manual', kb_name: 'Manual', kb_type: 'fulltext', operations: ['retrieve'] },
    ]);

    const res = ok(await retrieve({ query_text: 'run the installer', top_k: 3 }));
    expect(res.results.length).toBeGreaterThan(1);
    expect(res.results.length).toBeLessThanOrEqual(3);
    expect(res.results[0]).toEqual({
      id: expect.stringMatching(/^\d+$/),
      content: [{ type: 'text', text: expect.stringContaining('installer') }],
      metadata: expect.objectContaining({ document_id: docs.manual, document_name: 'manual.md', position: 0 }),
      distance: expect.any(Number),
      score: expect.any(Number),
    });
    const scores = res.results.map((e) => e.score as number);
    expect([...scores].sort((a, b) => b - a)).toEqual(scores);

    const filtered = ok(await retrieve({ filters: { document_id: docs.faq } }));
    expect(filtered.results.map((e) => (e.metadata as any).document_name)).toEqual(['faq.txt']);
    const byVersion = ok(await retrieve({ query_text: 'installer linux', filters: { product: 'agent', version: 2 } }));
    expect(byVersion.results.every((e) => (e.metadata as any).document_id === docs.manual)).toBe(true);
    expect(ok(await retrieve({ filters: { version: '2' } })).results).toEqual([]);
    // Full-text syntax is just text.
    expect(ok(await retrieve({ query_text: 'installer" OR NOT (firewall* :* &' })).results.length).toBeGreaterThan(0);
    expect(ok(await retrieve({ query_text: '!!! ***' })).results).toEqual([]);

    const rows = await audit(runId);
    expect(rows.filter((a) => a.action === 'knowledge.retrieve').every((a) => a.outcome === 'allowed')).toBe(true);
    expect(rows.at(-1)).toMatchObject({ resource: 'knowledge_base:manual', outcome: 'allowed' });
  });

  it('refuses a knowledge base the run was not granted, and audits it', async () => {
    const r = await retrieve({ kb_id: 'secret' });
    expectError(r, S.PERMISSION_DENIED, 'unauthorized');
    expect((await audit(runId)).at(-1)).toMatchObject({
      action: 'knowledge.retrieve',
      resource: 'knowledge_base:secret',
      outcome: 'denied',
      error_code: 'unauthorized',
    });
    expectError(await retrieve({ kb_id: 'missing' }), S.PERMISSION_DENIED, 'unauthorized');
  });

  it('answers bad input with INVALID_ARGUMENT', async () => {
    for (const req of [
      { query_text: '' },
      { query_text: '   ' },
      { query_text: 'x'.repeat(1001) },
      { top_k: 0 },
      { top_k: 51 },
      { filters: { document_id: { $in: ['a'] } } },
      { filters: { tags: ['a'] } },
    ]) {
      const r = await retrieve(req);
      expectError(r, S.INVALID_ARGUMENT, 'invalid_argument');
    }
    expect(ok(await retrieve({ top_k: 50 })).results.length).toBeGreaterThan(0);
  });

  it('drops deleted documents from retrieval, and refuses to delete a knowledge base agents use', async () => {
    expect((await host.api('DELETE', `${KB}/manual/documents/${docs.faq}`)).status).toBe(204);
    expect((await host.api('DELETE', `${KB}/manual/documents/${docs.faq}`)).status).toBe(404);
    const left = ok(await retrieve({ query_text: 'disk space installer', top_k: 50 }));
    expect(left.results.some((e) => (e.metadata as any).document_id === docs.faq)).toBe(false);

    const refused = await host.api('DELETE', `${KB}/manual`);
    expect(refused.status).toBe(409);
    expect(refused.body.error.details).toMatchObject({ kb_id: 'manual', agent_ids: ['reader'] });

    plugin.result(runId, 'run.completed', {}, 1);
    await host.sse(runId);
    expect(
      (await host.api('PUT', '/v1/admin/agents/reader', { runner_id: 'plugin:kb/raw/default', resource_policy: {} }))
        .status,
    ).toBe(200);
    expect((await host.api('DELETE', `${KB}/manual`)).status).toBe(204);
    expect((await host.api('GET', `${KB}/manual`)).status).toBe(404);
    expect((await host.api('GET', KB)).body.items.map((k: any) => k.kb_id)).toEqual(['secret']);
  });
});
