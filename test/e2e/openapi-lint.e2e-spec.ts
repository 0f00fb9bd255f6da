import { execFile } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { promisify } from 'node:util';
import { Host, TestDatabase } from './harness';

const ROOT = path.resolve(__dirname, '..', '..');
/** Where redocly.yaml's ignore file (.redocly.lint-ignore.yaml) expects the document. */
const DOCUMENT = path.join(ROOT, 'dist', 'openapi.json');
const METHODS = ['get', 'put', 'post', 'delete', 'patch'];

type Operation = Record<string, any> & { responses: Record<string, any> };

function operations(doc: any): [string, Operation][] {
  return Object.entries(doc.paths as Record<string, Record<string, Operation>>).flatMap(([p, item]) =>
    METHODS.filter((m) => item[m]).map((m): [string, Operation] => [`${m.toUpperCase()} ${p}`, item[m]]),
  );
}

const ERROR_REF = { $ref: '#/components/schemas/ErrorResponseDto' };

/** A property's schema: inline, a $ref, or a lone allOf around a $ref (a described reference). */
function resolve(doc: any, schema: any): any {
  const ref: string | undefined = schema.$ref ?? (schema.allOf?.length === 1 ? schema.allOf[0].$ref : undefined);
  return ref ? doc.components.schemas[ref.split('/').pop()!] : schema;
}

describe('OpenAPI document: Redocly-clean and describing what the API does', () => {
  const db = new TestDatabase();
  let host: Host;
  let doc: any;

  beforeAll(async () => {
    host = await new Host(db).start();
    const res = await fetch(`${host.http}/openapi.json`);
    expect(res.status).toBe(200);
    doc = await res.json();
    fs.mkdirSync(path.dirname(DOCUMENT), { recursive: true });
    fs.writeFileSync(DOCUMENT, JSON.stringify(doc, null, 2));
  }, 60_000);
  afterAll(async () => {
    await host?.stop();
    await db.drop();
  });

  it('lints with 0 errors and 0 warnings under redocly.yaml (recommended rules)', async () => {
    const cli = path.join(ROOT, 'node_modules/@redocly/cli/bin/cli.js');
    const run = await promisify(execFile)(process.execPath, [cli, 'lint', DOCUMENT, '--format=json'], {
      cwd: ROOT,
      maxBuffer: 16 * 1024 * 1024,
    }).catch((e: { stdout: string; stderr: string }) => e);
    const report = JSON.parse(run.stdout) as { totals: Record<string, number>; problems: unknown[] };
    expect(report.problems).toEqual([]);
    expect(report.totals).toMatchObject({ errors: 0, warnings: 0 });
  }, 120_000);

  it('has servers, an opaque bearer scheme required by default, and security: [] on the health probes only', () => {
    expect(doc.servers.length).toBeGreaterThan(0);
    const bearer = doc.components.securitySchemes.bearer;
    expect(bearer).toMatchObject({ type: 'http', scheme: 'bearer' });
    expect(bearer.bearerFormat).not.toMatch(/jwt/i);
    expect(doc.security).toEqual([{ bearer: [] }]);
    for (const [name, op] of operations(doc)) {
      expect([name, op.summary?.length > 0]).toEqual([name, true]);
      expect([name, op.security?.length === 0]).toEqual([name, name.includes(' /health/')]);
    }
  });

  it('types every error in the one error schema: 400/401/403/500 on every authenticated operation', () => {
    for (const [name, op] of operations(doc)) {
      const codes = name.includes(' /health/') ? ['500'] : ['400', '401', '403', '500'];
      for (const code of codes) {
        expect([name, code, op.responses[code]?.content?.['application/json']?.schema]).toEqual([
          name,
          code,
          ERROR_REF,
        ]);
      }
      for (const [code, response] of Object.entries(op.responses)) {
        if (/^[45]/.test(code) && !name.includes(' /health/')) {
          expect([name, code, response.content]).toEqual([name, code, { 'application/json': { schema: ERROR_REF } }]);
        }
      }
    }
    const error = doc.components.schemas.ErrorResponseDto;
    expect(error.required).toEqual(['error']);
    expect(doc.components.schemas.ProtocolErrorDto.properties.code.enum).toContain('rate_limited');
  });

  it('describes the run stream: text/event-stream frames named by result type, 204 at the end, JSON errors, stream tokens', () => {
    const op = doc.paths['/v1/runs/{run_id}/events'].get;
    expect(Object.keys(op.responses['200'].content)).toEqual(['text/event-stream']);
    const frame = doc.components.schemas.RunEventFrameDto;
    expect(Object.keys(frame.properties)).toEqual(['id', 'event', 'data']);
    expect(frame.properties.data.allOf).toEqual([{ $ref: '#/components/schemas/RunResultDto' }]);
    expect(op.description).toMatch(/onmessage` never fires/);
    expect(op.responses['204']).toBeDefined();
    expect(op.responses['404'].content).toEqual({ 'application/json': { schema: ERROR_REF } });
    expect(op.responses['429'].content).toEqual({ 'application/json': { schema: ERROR_REF } });
    expect(op.parameters.map((p: any) => p.name)).toEqual(expect.arrayContaining(['after', 'stream_token']));
    const mint = doc.paths['/v1/runs/{run_id}/stream-tokens'].post;
    expect(mint.responses['201'].content['application/json'].schema).toEqual({
      $ref: '#/components/schemas/StreamTokenDto',
    });
  });

  it('types policies, tool-source config, usage, manifests, the status filter and transcript items', () => {
    const s = doc.components.schemas;
    expect(Object.keys(s.CreateAgentDto.properties.resource_policy.properties)).toContain('allowed_model_ids');
    expect(s.CreateToolSourceDto.properties.config.oneOf.map((o: any) => o.title)).toEqual([
      'mcp_stdio',
      'mcp_http',
      'http',
    ]);
    expect(s.ToolSourceDto.properties.config.oneOf[0].required).toContain('command');
    const usage = resolve(doc, s.RunDto.properties.usage);
    expect(Object.keys(usage.properties)).toEqual(
      expect.arrayContaining(['prompt_tokens', 'completion_tokens', 'total_tokens']),
    );
    expect(s.RunnerDto.required).toContain('manifest');
    expect(s.RunnerDto.properties.manifest.allOf[0].required).toEqual(
      expect.arrayContaining(['id', 'protocol_version']),
    );
    const status = doc.paths['/v1/runs'].get.parameters.find((p: any) => p.name === 'status');
    expect(status.schema).toMatchObject({ type: 'array', items: { enum: expect.arrayContaining(['running']) } });
    expect(s.TranscriptItemDto.properties.attachment_refs).toEqual({
      type: 'array',
      items: { $ref: '#/components/schemas/TranscriptAttachmentDto' },
    });
    expect(s.TranscriptItemDto.properties.metadata).toMatchObject({
      $ref: '#/components/schemas/TranscriptMetadataDto',
    });
  });
});
