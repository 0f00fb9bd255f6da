import * as protoLoader from '@grpc/proto-loader';
import type * as generated from '@libs/proto';
import { decodeContext } from './context';
import { toStruct, toValue } from './json';
import type * as sdk from './types';
import { LOADER_OPTIONS, protoDir } from './wire';

/*
 * The SDK's run-context types are written by hand (plain JSON, no protobuf runtime in the
 * package); these checks fail when proto/runnerhost/v1/context.proto gains or loses a field
 * that the SDK does not mirror: at compile time against the ts-proto types of libs/proto, and
 * at run time through a real proto-loader encode/decode.
 */

/** true when A and B have the same field names. */
type SameKeys<A, B> = [Exclude<keyof A, keyof B>, Exclude<keyof B, keyof A>] extends [never, never] ? true : false;

const sameFields: true[] = [
  true satisfies SameKeys<sdk.RunContext, generated.RunContext>,
  true satisfies SameKeys<sdk.Trigger, generated.Trigger>,
  true satisfies SameKeys<sdk.EventContext, generated.EventContext>,
  true satisfies SameKeys<sdk.ConversationContext, generated.ConversationContext>,
  true satisfies SameKeys<sdk.ActorContext, generated.ActorContext>,
  true satisfies SameKeys<sdk.SubjectContext, generated.SubjectContext>,
  true satisfies SameKeys<sdk.ContentElement, generated.ContentElement>,
  true satisfies SameKeys<sdk.InputAttachment, generated.InputAttachment>,
  true satisfies SameKeys<sdk.Input, generated.Input>,
  true satisfies SameKeys<sdk.DeliveryContext, generated.DeliveryContext>,
  true satisfies SameKeys<sdk.ModelResource, generated.ModelResource>,
  true satisfies SameKeys<sdk.ToolResource, generated.ToolResource>,
  true satisfies SameKeys<sdk.KnowledgeBaseResource, generated.KnowledgeBaseResource>,
  true satisfies SameKeys<sdk.StorageResource, generated.StorageResource>,
  true satisfies SameKeys<sdk.Resources, generated.Resources>,
  true satisfies SameKeys<sdk.InlineContextPolicy, generated.InlineContextPolicy>,
  true satisfies SameKeys<sdk.AvailableApis, generated.AvailableApis>,
  true satisfies SameKeys<sdk.ContextAccess, generated.ContextAccess>,
  true satisfies SameKeys<sdk.RunState, generated.RunState>,
  true satisfies SameKeys<sdk.RuntimeContext, generated.RuntimeContext>,
];

describe('run context: the SDK types mirror context.proto', () => {
  it('has every field of the generated types (checked at compile time)', () => {
    expect(sameFields.every(Boolean)).toBe(true);
  });

  it('decodes a context that went through proto-loader into plain JSON', () => {
    const def = protoLoader.loadSync('runnerhost/v1/gateway.proto', { ...LOADER_OPTIONS, includeDirs: [protoDir()] });
    const connect = (def['runnerhost.v1.RunnerGatewayService'] as protoLoader.ServiceDefinition).Connect;
    const wire = {
      run: {
        runner_id: 'plugin:a/b/default',
        runner_name: 'default',
        context: {
          run_id: 'r1',
          input: { text: 'hi', interaction: toStruct({ id: 'x' }) },
          event: { event_id: 'e1', event_type: 'message.received', source: 'api', data: toStruct({ n: 1 }) },
          resources: {
            tools: [
              { tool_name: 't', parameters: toStruct({ type: 'object', properties: { a: { type: 'string' } } }) },
            ],
            storage: { plugin_storage: true },
          },
          context: { available_apis: { steering_pull: true }, has_history_before: false },
          state: { conversation: toStruct({ k: [1, 'two', null, { deep: true }] }) },
          runtime: { deadline_at: 1234.5, metadata: toStruct({ bot_id: 'b' }) },
          config: { fields: { mode: toValue('echo'), n: toValue(3) } },
        },
      },
    };
    const decoded = connect.responseDeserialize(connect.responseSerialize(wire)) as {
      run: { context: Record<string, unknown> };
    };
    const ctx = decodeContext(decoded.run.context);
    expect(ctx.run_id).toBe('r1');
    expect(ctx.config).toEqual({ mode: 'echo', n: 3 });
    expect(ctx.metadata).toEqual({});
    expect(ctx.input).toMatchObject({ text: 'hi', interaction: { id: 'x' }, contents: [], attachments: [] });
    expect(ctx.event?.data).toEqual({ n: 1 });
    expect(ctx.resources?.tools[0].parameters).toEqual({ type: 'object', properties: { a: { type: 'string' } } });
    expect(ctx.resources?.tools[0].annotations).toBeNull();
    expect(ctx.resources?.storage).toEqual({ plugin_storage: true, workspace_storage: false, binding_storage: false });
    expect(ctx.state).toEqual({
      conversation: { k: [1, 'two', null, { deep: true }] },
      actor: null,
      subject: null,
      runner: null,
    });
    expect(ctx.runtime).toMatchObject({ deadline_at: 1234.5, metadata: { bot_id: 'b' } });
    expect(ctx.context?.available_apis?.steering_pull).toBe(true);
    // Unset messages are null, as the types say.
    expect([ctx.conversation, ctx.actor, ctx.subject, ctx.delivery, ctx.trigger]).toEqual([
      null,
      null,
      null,
      null,
      null,
    ]);
  });
});
