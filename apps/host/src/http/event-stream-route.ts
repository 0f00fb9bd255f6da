import { applyDecorators, type Type } from '@nestjs/common';
import { ApiExtraModels, ApiHeader, ApiResponse, getSchemaPath } from '@nestjs/swagger';
import { AcceptsStreamToken } from '@libs/auth';

/**
 * A run's SSE route: accepts a stream token for its `:run_id` in `?stream_token=` (EventSource
 * cannot send Authorization; the query DTO must declare `stream_token`), and in the document its
 * 200 is `text/event-stream` with the frame's fields as the schema (OpenAPI 3.0 cannot type a
 * stream); its errors stay JSON (see openapi-complete).
 */
export function EventStreamRoute(frame: Type<unknown>, description: string): MethodDecorator {
  return applyDecorators(
    AcceptsStreamToken(),
    ApiExtraModels(frame),
    ApiHeader({
      name: 'Last-Event-ID',
      required: false,
      description: 'Resume after this sequence (EventSource sends it when it reconnects); ?after= wins',
      schema: { type: 'string', pattern: '^\\d+$' },
    }),
    ApiResponse({
      status: 200,
      description,
      content: { 'text/event-stream': { schema: { $ref: getSchemaPath(frame) } } },
    }),
    ApiResponse({
      status: 204,
      description:
        'The run has ended and the reader has everything (Last-Event-ID or ?after= at its terminal result): ' +
        'EventSource stops reconnecting',
    }),
  );
}
