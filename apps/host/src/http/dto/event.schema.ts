import { openApiComponents } from '@libs/protocol';
import { interactionSubmissionSchema, submitEventSchema } from '@libs/runs';
import { CompiledBody } from '../compiled-body';

/**
 * The bodies of `POST /v1/events` and `POST /v1/interactions/{id}/submit`: their schemas (and the
 * types inferred from them) live with admission in libs/runs/src/event-submission.ts; the edge
 * compiles them once at boot (module load) and shows them as the OpenAPI components of the document
 * (docs/architecture.md#validation).
 */
export const submitEventBody = new CompiledBody(submitEventSchema);
export const submitInteractionBody = new CompiledBody(interactionSubmissionSchema);

/** The OpenAPI components of the compiled bodies (added to the document by apps/host/src/openapi). */
export function compiledBodyComponents(): Record<string, Record<string, unknown>> {
  return { ...openApiComponents(submitEventSchema), ...openApiComponents(interactionSubmissionSchema) };
}

/** `@ApiBody` of a route whose body is one of these components. */
export const bodyRef = (name: 'SubmitEventDto' | 'SubmitInteractionDto') => ({
  schema: { $ref: `#/components/schemas/${name}` },
});
