import type { ChatCompletionMessage } from 'openai/resources/chat/completions';
import { DomainError } from '@libs/protocol';
import { fromChatMessage, stripThink, toChatMessages, toChatTools } from './message-mapping';

const ALL = { tool_calling: true, vision: true, streaming: true };
const PNG = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 0]).toString('base64');
const JPEG = Buffer.from([0xff, 0xd8, 0xff, 0xe0, 0, 0, 0, 0]).toString('base64');

function refusal(fn: () => unknown): DomainError {
  try {
    fn();
  } catch (e) {
    expect(e).toBeInstanceOf(DomainError);
    expect((e as DomainError).code).toBe('invalid_argument');
    return e as DomainError;
  }
  throw new Error('expected a refusal');
}

describe('Protocol v1 messages → chat completions', () => {
  it('maps roles, names, assistant tool calls and tool results one to one', () => {
    expect(
      toChatMessages(
        [
          { role: 'system', content: 'be brief' },
          { role: 'user', name: 'ann', content: 'weather in Oslo?' },
          {
            role: 'assistant',
            content: null,
            tool_calls: [
              { id: 'call_1', type: 'function', function: { name: 'weather', arguments: '{"city":"Oslo"}' } },
            ],
          },
          { role: 'tool', tool_call_id: 'call_1', content: [{ type: 'text', text: '{"c": 3}' }] },
          {
            role: 'assistant',
            content: [
              { type: 'text', text: 'It is ' },
              { type: 'text', text: '3 °C.' },
            ],
          },
        ],
        ALL,
      ),
    ).toEqual([
      { role: 'system', content: 'be brief' },
      { role: 'user', name: 'ann', content: 'weather in Oslo?' },
      {
        role: 'assistant',
        content: null,
        tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'weather', arguments: '{"city":"Oslo"}' } }],
      },
      { role: 'tool', tool_call_id: 'call_1', content: '{"c": 3}' },
      { role: 'assistant', content: 'It is 3 °C.' },
    ]);
  });

  it('maps multimodal parts: text, image_url (string or object), image_base64 → data URL with its MIME type', () => {
    const [m] = toChatMessages(
      [
        {
          role: 'user',
          content: [
            { type: 'text', text: 'what is this?' },
            { type: 'image_url', image_url: { url: 'https://x.test/a.png', detail: 'low' } },
            { type: 'image_url', image_url: 'https://x.test/b.png' },
            { type: 'image_base64', image_base64: PNG },
            { type: 'image_base64', image_base64: JPEG },
            { type: 'image_base64', image_base64: 'data:image/webp;base64,AAAA' },
          ],
        },
      ],
      ALL,
    );
    expect(m.content).toEqual([
      { type: 'text', text: 'what is this?' },
      { type: 'image_url', image_url: { url: 'https://x.test/a.png', detail: 'low' } },
      { type: 'image_url', image_url: { url: 'https://x.test/b.png' } },
      { type: 'image_url', image_url: { url: `data:image/png;base64,${PNG}` } },
      { type: 'image_url', image_url: { url: `data:image/jpeg;base64,${JPEG}` } },
      { type: 'image_url', image_url: { url: 'data:image/webp;base64,AAAA' } },
    ]);
  });

  it.each([
    [[{ role: 'command', content: '/reset' }], 'messages[0].role'],
    [[{ content: 'no role' }], 'messages[0]'],
    [[{ role: 'user', content: [{ type: 'file_url', file_url: 'https://x/f.pdf' }] }], 'messages[0].content[0].type'],
    [
      [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'ftp://x' } }] }],
      'messages[0].content[0].image_url.url',
    ],
    [[{ role: 'system', content: [{ type: 'image_base64', image_base64: PNG }] }], 'messages[0].content[0].type'],
    [[{ role: 'tool', content: 'x' }], 'messages[0].tool_call_id'],
    [
      [{ role: 'assistant', tool_calls: [{ function: { name: 'f', arguments: '{}' } }] }],
      'messages[0].tool_calls[0].id',
    ],
  ])('refuses %j naming %s', (messages, field) => {
    expect(refusal(() => toChatMessages(messages, ALL)).details.field).toBe(field);
  });

  it('refuses images for a model without vision', () => {
    const e = refusal(() =>
      toChatMessages([{ role: 'user', content: [{ type: 'image_base64', image_base64: PNG }] }], {
        ...ALL,
        vision: false,
      }),
    );
    expect(e.details).toEqual({ field: 'messages[0].content[0]', reason: 'vision_unsupported' });
  });

  it('maps tool definitions in both forms; refuses bad names', () => {
    expect(
      toChatTools([
        {
          name: 'search',
          description: 'Find things',
          parameters: { type: 'object', properties: { q: { type: 'string' } } },
        },
        { type: 'function', function: { name: 'clock', strict: true } },
      ]),
    ).toEqual([
      {
        type: 'function',
        function: {
          name: 'search',
          description: 'Find things',
          parameters: { type: 'object', properties: { q: { type: 'string' } } },
        },
      },
      { type: 'function', function: { name: 'clock', parameters: { type: 'object', properties: {} }, strict: true } },
    ]);
    expect(refusal(() => toChatTools([{ name: 'has space' }])).details.field).toBe('tools[0].name');
    expect(
      refusal(() => toChatTools([{ type: 'function', function: { name: 'x', parameters: [] } }])).details.field,
    ).toBe('tools[0].function.parameters');
  });
});

describe('chat completions → Protocol v1 message', () => {
  const message = (content: string | null, extra: object = {}) =>
    ({ role: 'assistant', content, refusal: null, ...extra }) as ChatCompletionMessage;

  it('keeps function tool calls and the finish reason', () => {
    const out = fromChatMessage(
      message(null, {
        tool_calls: [{ id: 'c1', type: 'function', function: { name: 'f', arguments: '{"a":1}' } }],
      }),
      'tool_calls',
      false,
    );
    expect(out).toEqual({
      role: 'assistant',
      content: null,
      tool_calls: [{ id: 'c1', type: 'function', function: { name: 'f', arguments: '{"a":1}' } }],
      provider_specific_fields: { finish_reason: 'tool_calls' },
    });
  });

  it('remove_think strips reasoning blocks and reasoning_content; without it both stay', () => {
    const m = message('<think>private</think>\nAnswer', { reasoning_content: 'why' });
    expect(fromChatMessage(m, 'stop', true)).toMatchObject({ content: 'Answer' });
    expect(fromChatMessage(m, 'stop', true).reasoning_content).toBeUndefined();
    expect(fromChatMessage(m, 'stop', false)).toMatchObject({
      content: '<think>private</think>\nAnswer',
      reasoning_content: 'why',
    });
  });

  it.each([
    ['<think>a</think>b', 'b'],
    ['<THINK>a\nb</think>\n\n  c', 'c'],
    ['x <think attr="1">y</think> z', 'x z'],
    ['<think>one</think>A<think>two</think>B', 'AB'],
    ['orphan reasoning</think>\nanswer', 'answer'],
    ['no tags at all', 'no tags at all'],
    ['<thinking>is not a think tag</thinking>', '<thinking>is not a think tag</thinking>'],
  ])('stripThink(%j) = %j', (input, out) => {
    expect(stripThink(input)).toBe(out);
  });
});
