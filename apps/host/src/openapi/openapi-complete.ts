import type { OpenAPIObject } from '@nestjs/swagger';

/** The one error body of the API (ErrorResponseDto): `{error: {code, message, retryable, details}}`. */
export const ERROR_SCHEMA = 'ErrorResponseDto';

type Responses = Record<string, { description?: string; content?: Record<string, unknown> }>;
interface Operation {
  summary?: string;
  requestBody?: unknown;
  security?: Record<string, string[]>[];
  responses: Responses;
  [key: string]: unknown;
}

const METHODS = ['get', 'put', 'post', 'delete', 'patch', 'options', 'head'] as const;

/** Errors any authenticated operation can answer, whatever its controller declares. */
const AUTHENTICATED_ERRORS: Record<string, string> = {
  '400':
    'invalid_argument: a path, query, header or body value breaks a rule (`details.field` names it, `details.problems` lists the first 100 problems, `details.problems_omitted` counts any others)',
  '401': 'unauthenticated: no API key, or one that is unknown or revoked',
  '403': "unauthorized: the key's role may not use this operation",
};
/** Errors any operation with a request body can answer (Fastify's limit, before any parser). */
const BODY_ERRORS: Record<string, string> = {
  '413': 'payload_too_large: the body is over the 5 MiB request limit',
};
/** Errors every operation can answer. */
const COMMON_ERRORS: Record<string, string> = {
  '500': 'runtime_error: an unexpected failure; the message carries an error id that the host logged (no detail leaks)',
};

function errorResponse(description: string) {
  return { description, content: { 'application/json': { schema: { $ref: `#/components/schemas/${ERROR_SCHEMA}` } } } };
}

/**
 * What decorators cannot say once for every operation: the error answers every route shares (all
 * in the one error schema, so a generated client types them), and JSON (not the operation's
 * `text/event-stream`) as the content type of an event stream's errors.
 */
export function completeDocument(doc: OpenAPIObject): OpenAPIObject {
  const rootSecured = (doc.security ?? []).length > 0;
  for (const item of Object.values(doc.paths)) {
    for (const method of METHODS) {
      const op = (item as Record<string, Operation | undefined>)[method];
      if (!op) {
        continue;
      }
      const secured = op.security === undefined ? rootSecured : op.security.length > 0;
      const standard = {
        ...(secured ? AUTHENTICATED_ERRORS : {}),
        ...(op.requestBody ? BODY_ERRORS : {}),
        ...COMMON_ERRORS,
      };
      for (const [status, description] of Object.entries(standard)) {
        op.responses[status] ??= errorResponse(description);
      }
      for (const [status, response] of Object.entries(op.responses)) {
        if (!/^[45]/.test(status)) {
          continue;
        }
        const json = response.content?.['application/json'];
        // Errors are always JSON: an error declared without a body, or with the operation's stream
        // type (ApiProduces), is the error schema; one with its own JSON body keeps only that.
        op.responses[status] = json
          ? { ...response, content: { 'application/json': json } }
          : errorResponse(response.description || standard[status] || 'An error');
      }
    }
  }
  return doc;
}
