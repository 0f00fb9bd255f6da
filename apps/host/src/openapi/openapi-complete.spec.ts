import type { OpenAPIObject } from '@nestjs/swagger';
import { completeDocument } from './openapi-complete';

const ERROR = { 'application/json': { schema: { $ref: '#/components/schemas/ErrorResponseDto' } } };

function doc(paths: Record<string, unknown>): OpenAPIObject {
  return { openapi: '3.0.0', info: { title: 't', version: '1' }, security: [{ bearer: [] }], paths } as OpenAPIObject;
}

describe('completeDocument', () => {
  it('adds the shared errors an operation can answer, in the one error schema', () => {
    const d = completeDocument(
      doc({
        '/a': {
          get: { responses: { '200': { description: 'ok' } } },
          post: { requestBody: {}, responses: { '201': { description: 'ok' }, '409': { description: 'taken' } } },
        },
        '/health': { get: { security: [], responses: { '200': { description: 'ok' } } } },
      }),
    );
    const a = d.paths['/a'];
    expect(Object.keys(a.get!.responses).sort()).toEqual(['200', '400', '401', '403', '500']);
    expect(Object.keys(a.post!.responses).sort()).toEqual(['201', '400', '401', '403', '409', '413', '500']);
    expect(a.post!.responses['409']).toEqual({ description: 'taken', content: ERROR });
    expect(a.get!.responses['401']).toMatchObject({ content: ERROR });
    // No key, no input: only the 500 is shared.
    expect(Object.keys(d.paths['/health'].get!.responses).sort()).toEqual(['200', '500']);
  });

  it("turns a stream operation's errors into JSON and keeps errors that declare their own JSON body", () => {
    const d = completeDocument(
      doc({
        '/s': {
          get: {
            responses: {
              '200': { description: 'frames', content: { 'text/event-stream': { schema: { type: 'string' } } } },
              '404': { description: 'unknown', content: { 'text/event-stream': { schema: { type: 'string' } } } },
              '409': {
                description: 'taken',
                content: { 'application/json': ERROR['application/json'], 'text/event-stream': { schema: {} } },
              },
              '503': { description: 'not ready', content: { 'application/json': { schema: { type: 'object' } } } },
            },
          },
        },
      }),
    );
    const r = d.paths['/s'].get!.responses as Record<string, unknown>;
    expect(r['404']).toEqual({ description: 'unknown', content: ERROR });
    expect(r['409']).toEqual({ description: 'taken', content: ERROR });
    expect(r['503']).toEqual({
      description: 'not ready',
      content: { 'application/json': { schema: { type: 'object' } } },
    });
    expect(r['200']).toEqual({
      description: 'frames',
      content: { 'text/event-stream': { schema: { type: 'string' } } },
    });
  });
});
