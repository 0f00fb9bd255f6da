import type { INestApplication } from '@nestjs/common';
import { DocumentBuilder, SwaggerModule, type OpenAPIObject } from '@nestjs/swagger';
import { HOST_VERSION } from '@libs/runner-gateway';
import { compiledBodyComponents } from '../http/dto/event.schema';
import { completeDocument } from './openapi-complete';

const DESCRIPTION = [
  'Host side of an agent platform: events in, runs on runner plugins over gRPC, results out.',
  '',
  'Every error is `{"error": {"code", "message", "retryable", "details"}}` (ErrorResponseDto) with the protocol',
  'codes; `details.field` names the input at fault.',
  '',
  'Browsers: cross-origin calls are allowed for the origins in CORS_ALLOWED_ORIGINS (off by default). An',
  '`EventSource` cannot send `Authorization`: mint a run-scoped stream token with',
  '`POST /v1/runs/{run_id}/stream-tokens` and pass it as `?stream_token=`. SSE frames are named by result type',
  '(`event: message.delta`, …), so `EventSource.onmessage` never fires: use `addEventListener(<type>)`.',
].join('\n');

/** The OpenAPI document served at /openapi.json (and rendered at /docs). */
export function createOpenApiDocument(app: INestApplication): OpenAPIObject {
  const config = new DocumentBuilder()
    .setTitle('Runner Host')
    .setDescription(DESCRIPTION)
    .setVersion(HOST_VERSION)
    // Relative: the API is served at the root of whatever address the document was fetched from.
    .addServer('/', 'This host')
    .addBearerAuth({
      type: 'http',
      scheme: 'bearer',
      bearerFormat: 'API key',
      description:
        'An opaque API key (`Authorization: Bearer <key>`), created with POST /v1/admin/api-keys or given as ' +
        'ADMIN_API_KEY. Not a JWT: it carries nothing and is looked up (hashed) by the host.',
    })
    // Every operation needs a key unless it says `security: []` (the health probes).
    .addSecurityRequirements('bearer')
    .build();
  const doc = SwaggerModule.createDocument(app, config);
  // Bodies checked by a compiled JSON schema are described by that same schema (docs/architecture.md#validation).
  doc.components = { ...doc.components, schemas: { ...doc.components?.schemas, ...compiledBodyComponents() } };
  return completeDocument(doc);
}

export function setupOpenApi(app: INestApplication): void {
  SwaggerModule.setup('docs', app, createOpenApiDocument(app), { jsonDocumentUrl: 'openapi.json' });
}
