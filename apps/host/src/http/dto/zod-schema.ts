import { z } from 'zod';

/**
 * The OpenAPI 3.0 schema of a zod schema, so that the document shows the very shape the host
 * validates (input: what a client may send, defaults optional; output: what the host returns).
 */
export function openApiSchemaOf(schema: z.ZodType, io: 'input' | 'output'): Record<string, unknown> {
  const { $schema: _ignored, ...rest } = z.toJSONSchema(schema, {
    target: 'openapi-3.0',
    io,
    unrepresentable: 'any',
  }) as Record<string, unknown>;
  return rest;
}
