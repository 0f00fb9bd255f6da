import { DomainError } from '@libs/protocol';
import { compiledBodyComponents, submitEventBody, submitInteractionBody } from './event.schema';

const ev = (over: Record<string, unknown> = {}, e: Record<string, unknown> = {}) => ({
  agent_id: 'a',
  event: { event_type: 'message.received', source: 'api', ...e },
  input: { text: 'hi' },
  ...over,
});

function refusal(
  parse: (v: unknown) => unknown,
  value: unknown,
): { field: unknown; message: string; problems: unknown } {
  try {
    parse(value);
  } catch (e) {
    expect(e).toBeInstanceOf(DomainError);
    const d = e as DomainError;
    expect(d.code).toBe('invalid_argument');
    return { field: d.details.field, message: d.message, problems: d.details.problems };
  }
  throw new Error('admitted');
}

/*
 * The 400s of POST /v1/events as the class-validator DTO answered them before the compiled schema
 * replaced it (same field, same sentences, same order) — except where noted.
 */
describe('POST /v1/events body: compiled schema, field-named refusals', () => {
  it.each<[string, unknown, string, string]>([
    [
      'no agent',
      ev({ agent_id: undefined }),
      'agent_id',
      'agent_id: agent_id must be shorter than or equal to 128 characters; agent_id: agent_id should not be empty; agent_id: agent_id must be a string',
    ],
    [
      'agent number',
      ev({ agent_id: 5 }),
      'agent_id',
      'agent_id: agent_id must be shorter than or equal to 128 characters; agent_id: agent_id must be a string',
    ],
    ['agent empty', ev({ agent_id: '' }), 'agent_id', 'agent_id: agent_id should not be empty'],
    [
      'no event',
      ev({ event: undefined }),
      'event',
      'event: event should not be null or undefined; event: event must be an object',
    ],
    [
      'event null',
      ev({ event: null }),
      'event',
      'event: event should not be null or undefined; event: event must be an object; event: nested property event must be either object or array',
    ],
    [
      'event string',
      ev({ event: 'x' }),
      'event',
      'event: event must be an object; event: nested property event must be either object or array',
    ],
    ['event array', ev({ event: [] }), 'event', 'event: event must be an object'],
    [
      'no input',
      ev({ input: undefined }),
      'input',
      'input: input should not be null or undefined; input: input must be an object',
    ],
    [
      'no event_type',
      ev({ event: { source: 'api' } }),
      'event.event_type',
      'event.event_type: event_type must be a dotted name such as message.received; event.event_type: event_type must be a string',
    ],
    [
      'bad source',
      ev({}, { source: 'mars' }),
      'event.source',
      'event.source: source must be one of the following values: platform, webui, api, scheduler, system, host_adapter',
    ],
    [
      'event_id num',
      ev({}, { event_id: 3 }),
      'event.event_id',
      'event.event_id: event_id must be 1-255 characters and not start with white space; event.event_id: event_id must be a string',
    ],
    [
      'event_time float',
      ev({}, { event_time: 1.5 }),
      'event.event_time',
      'event.event_time: event_time must be an integer number',
    ],
    [
      'event_time string',
      ev({}, { event_time: '5' }),
      'event.event_time',
      'event.event_time: event_time must not be greater than 253402300799; event.event_time: event_time must not be less than 0; event.event_time: event_time must be an integer number',
    ],
    [
      'raw_ref empty',
      ev({}, { raw_ref: {} }),
      'event.raw_ref.ref_id',
      'event.raw_ref.ref_id: ref_id must be shorter than or equal to 255 characters; event.raw_ref.ref_id: ref_id should not be empty; event.raw_ref.ref_id: ref_id must be a string',
    ],
    [
      'raw_ref extra',
      ev({}, { raw_ref: { ref_id: 'r', x: 1 } }),
      'event.raw_ref.x',
      'event.raw_ref.x: property x should not exist',
    ],
    ['data array', ev({}, { data: [1] }), 'event.data', 'event.data: must be a JSON object'],
    [
      'data big',
      ev({}, { data: { s: 'x'.repeat(300_000) } }),
      'event.data',
      'event.data: must be at most 262144 bytes of JSON',
    ],
    [
      'unknown two',
      ev({ colour: 'red', size: 1 }),
      'colour',
      'colour: property colour should not exist; size: property size should not exist',
    ],
    ['unknown nested', ev({}, { colour: 'red' }), 'event.colour', 'event.colour: property colour should not exist'],
    [
      'conv string',
      ev({ conversation: 'c' }),
      'conversation',
      'conversation: nested property conversation must be either object or array',
    ],
    [
      'conv empty',
      ev({ conversation: {} }),
      'conversation.conversation_id',
      'conversation.conversation_id: conversation_id must be 1-255 characters; conversation.conversation_id: conversation_id must be a string',
    ],
    [
      'conv array',
      ev({ conversation: [{ conversation_id: 'c' }] }),
      'conversation',
      'conversation: nested property conversation must be either object or array',
    ],
    [
      'contents not array',
      ev({ input: { contents: 'x' } }),
      'input.contents',
      'input.contents: contents must contain no more than 100 elements; input.contents: contents must be an array; input.contents: each value in nested property contents must be either object or array',
    ],
    [
      'contents bad type',
      ev({ input: { contents: [{ type: 'video' }] } }),
      'input.contents[0].type',
      'input.contents[0].type: type must be one of the following values: text, image_url, image_base64, file_url, file_base64',
    ],
    [
      'contents item string',
      ev({ input: { contents: ['x'] } }),
      'input.contents[0]',
      'input.contents[0]: each value in nested property contents must be either object or array',
    ],
    [
      'contents 101',
      ev({ input: { contents: Array.from({ length: 101 }, () => ({ type: 'text' })) } }),
      'input.contents',
      'input.contents: contents must contain no more than 100 elements',
    ],
    [
      'attachment bad source',
      ev({ input: { attachments: [{ type: 'file', source: 'x' }] } }),
      'input.attachments[0].source',
      'input.attachments[0].source: source must be one of the following values: url, base64, message_chain',
    ],
    [
      'interaction no token',
      ev({ input: { interaction: {} } }),
      'input.interaction.callback_token',
      'input.interaction.callback_token: callback_token must be shorter than or equal to 64 characters; input.interaction.callback_token: callback_token must be a string',
    ],
    [
      'interaction values arr',
      ev({ input: { interaction: { callback_token: 't', values: [] } } }),
      'input.interaction.values',
      'input.interaction.values: must be a JSON object',
    ],
    [
      'delivery mms big',
      ev({ delivery: { max_message_size: 2 ** 31 } }),
      'delivery.max_message_size',
      'delivery.max_message_size: max_message_size must not be greater than 2147483647',
    ],
    [
      'delivery interactions bad',
      ev({ delivery: { interactions: { field_types: ['x'] } } }),
      'delivery.interactions.field_types',
      'delivery.interactions.field_types: each value in field_types must be one of the following values: text, textarea, select, multiselect, number, boolean, file',
    ],
    [
      'delivery interactions ft str',
      ev({ delivery: { interactions: { field_types: 'text' } } }),
      'delivery.interactions.field_types',
      'delivery.interactions.field_types: field_types must contain no more than 7 elements; delivery.interactions.field_types: field_types must be an array',
    ],
    [
      'concurrency bad',
      ev({ concurrency: 'x' }),
      'concurrency',
      'concurrency: concurrency must be one of the following values: steer, queue, interrupt, reject',
    ],
    ['body array', [1], 'body', 'body: body must be a JSON object'],
    [
      'multi',
      ev({ agent_id: 5, event: { source: 'x' }, colour: 1 }),
      'colour',
      'colour: property colour should not exist; agent_id: agent_id must be shorter than or equal to 128 characters; agent_id: agent_id must be a string; event.event_type: event_type must be a dotted name such as message.received; event.event_type: event_type must be a string; event.source: source must be one of the following values: platform, webui, api, scheduler, system, host_adapter',
    ],
  ])('%s', (_name, value, field, message) => {
    const r = refusal((v) => submitEventBody.parse(v), value);
    expect(r.field).toBe(field);
    expect(r.message).toBe(message);
    expect((r.problems as { field: string }[])[0].field).toBe(field);
  });

  it('lists the first 100 problems in schema order and counts the others (docs/api.md#validation)', () => {
    const unknown = (n: number, prefix = 'k') =>
      Object.fromEntries(Array.from({ length: n }, (_, i) => [`${prefix}${i}`, 0]));
    // 150 unknown keys inside `event`, one at the top, a bad agent_id: the top-level key and
    // agent_id come first in schema order, whatever order ajv reports them in.
    const value = ev({ agent_id: 5, ...unknown(1, 'zz') }, unknown(150));
    let error: DomainError | undefined;
    try {
      submitEventBody.parse(value);
    } catch (e) {
      error = e as DomainError;
    }
    const problems = error!.details.problems as { field: string; rule: string }[];
    expect(problems).toHaveLength(100);
    expect(problems.slice(0, 4)).toEqual([
      { field: 'zz0', rule: 'property zz0 should not exist' },
      { field: 'agent_id', rule: 'agent_id must be shorter than or equal to 128 characters' },
      { field: 'agent_id', rule: 'agent_id must be a string' },
      { field: 'event.k0', rule: 'property k0 should not exist' },
    ]);
    expect(problems.at(-1)).toEqual({ field: 'event.k96', rule: 'property k96 should not exist' });
    expect(error!.details.field).toBe('zz0');
    expect(error!.details.problems_omitted).toBe(53); // 153 found
    expect(error!.message).toMatch(/^zz0: property zz0 should not exist; agent_id: /);
    expect(error!.message).toMatch(
      /; event\.k96: property k96 should not exist; and 53 more problems \(details\.problems_omitted\)$/,
    );

    // Exactly 100: all listed, no count.
    const hundred = refusal((v) => submitEventBody.parse(v), ev(unknown(100)));
    expect(hundred.problems).toHaveLength(100);
    expect(hundred.message).not.toContain('more problems');
    try {
      submitEventBody.parse(ev(unknown(100)));
    } catch (e) {
      expect((e as DomainError).details).not.toHaveProperty('problems_omitted');
    }
  });

  it('admits a minimal event and a full one, null optional fields read as absent', () => {
    expect(submitEventBody.parse(ev())).toEqual(ev());
    const full = ev(
      {
        conversation: { conversation_id: 'c', thread_id: null },
        actor: { actor_type: 'user', metadata: {} },
        subject: { subject_type: 's' },
        delivery: {
          surface: 'api',
          max_message_size: 5,
          supports_edit: true,
          interactions: { field_types: ['text'], max_fields: 3 },
        },
        locale: 'en',
        concurrency: null,
        metadata: null,
        input: {
          text: 'x',
          contents: [
            { type: 'text', text: 'y' },
            { type: 'image_url', image_url: { url: 'u' } },
          ],
          attachments: [{ type: 'file', size: 3, source: null }],
          interaction: { callback_token: 't', action_id: null, values: {} },
        },
      },
      { event_id: 'e1', event_time: 5, raw_ref: { ref_id: 'r' }, data: { a: 1 } },
    );
    const admitted = submitEventBody.parse(structuredClone(full));
    // Null reads as absent: the admitted body has no null optional field (open maps keep theirs).
    expect(admitted).toEqual(
      ev(
        {
          conversation: { conversation_id: 'c' },
          actor: { actor_type: 'user', metadata: {} },
          subject: { subject_type: 's' },
          delivery: {
            surface: 'api',
            max_message_size: 5,
            supports_edit: true,
            interactions: { field_types: ['text'], max_fields: 3 },
          },
          locale: 'en',
          input: {
            text: 'x',
            contents: [
              { type: 'text', text: 'y' },
              { type: 'image_url', image_url: { url: 'u' } },
            ],
            attachments: [{ type: 'file', size: 3 }],
            interaction: { callback_token: 't', values: {} },
          },
        },
        { event_id: 'e1', event_time: 5, raw_ref: { ref_id: 'r' }, data: { a: 1 } },
      ),
    );
    expect(submitEventBody.parse(ev({ metadata: { a: null } }, { data: { b: [null] } }))).toEqual(
      ev({ metadata: { a: null } }, { data: { b: [null] } }),
    );
  });

  it('checks the interaction submit body with the same rules as input.interaction', () => {
    expect(refusal((v) => submitInteractionBody.parse(v), { callback_token: 't', x: 1 })).toMatchObject({
      field: 'x',
      message: 'x: property x should not exist',
    });
    expect(
      refusal((v) => submitEventBody.parse(v), ev({ input: { interaction: { callback_token: 't', x: 1 } } })),
    ).toMatchObject({ field: 'input.interaction.x' });
    expect(submitInteractionBody.parse({ callback_token: 't', action_id: null })).toEqual({ callback_token: 't' });
  });

  it('describes the body in the OpenAPI components it is compiled from', () => {
    const c = compiledBodyComponents() as Record<string, any>;
    expect(Object.keys(c).sort()).toEqual(
      [
        'ActorDto',
        'AttachmentDto',
        'ContentElementDto',
        'ConversationDto',
        'DeliveryDto',
        'EventContextDto',
        'ImageUrlDto',
        'InputDto',
        'InteractionCapabilitiesDto',
        'InteractionInputDto',
        'RawEventRefDto',
        'SubjectDto',
        'SubmitEventDto',
        'SubmitInteractionDto',
      ].sort(),
    );
    expect(c.SubmitEventDto.required).toEqual(['agent_id', 'event', 'input']);
    expect(c.SubmitEventDto.properties.event).toEqual({ $ref: '#/components/schemas/EventContextDto' });
    expect(c.SubmitEventDto.properties.conversation).toEqual({ $ref: '#/components/schemas/ConversationDto' });
    expect(c.InputDto.properties.contents.items).toEqual({ $ref: '#/components/schemas/ContentElementDto' });
    expect(c.InputDto.properties.interaction.allOf).toEqual([{ $ref: '#/components/schemas/InteractionInputDto' }]);
    expect(c.EventContextDto.properties.source.enum).toEqual([
      'platform',
      'webui',
      'api',
      'scheduler',
      'system',
      'host_adapter',
    ]);
    expect(c.EventContextDto.properties.event_type.pattern).toBe('^[a-z][a-z0-9_]*(\\.[a-z0-9_]+)+$');
    expect(c.EventContextDto.properties.data['x-max-json-bytes']).toBe(262144);
    expect(c.ConversationDto.nullable).toBeUndefined();
    expect(c.SubmitEventDto.properties.concurrency.enum).toEqual(['steer', 'queue', 'interrupt', 'reject', null]);
  });
});
