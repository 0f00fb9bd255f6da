import { encodingFor, TokenCounter } from './tokenizer';

/*
 * Token counts: known js-tiktoken outputs, and the chat-completions billing rules computed from
 * the encoding directly for fixed strings.
 */

const tokens = (name: 'o200k_base' | 'cl100k_base', s: string) => encodingFor(name).encode(s, [], []).length;

describe('TokenCounter', () => {
  it.each(['o200k_base', 'cl100k_base'] as const)('"hello world" is 2 tokens in %s', (name) => {
    expect(new TokenCounter(name).text('hello world')).toBe(2);
    expect(encodingFor(name).encode('hello world')).toHaveLength(2);
  });

  it('uses the named encoding (the encodings differ)', () => {
    const text = 'Übermäßig lange Komposita, 東京, and emoji 🦆🦆🦆';
    expect(new TokenCounter('o200k_base').text(text)).toBe(tokens('o200k_base', text));
    expect(new TokenCounter('cl100k_base').text(text)).toBe(tokens('cl100k_base', text));
    expect(tokens('o200k_base', text)).not.toBe(tokens('cl100k_base', text));
  });

  it('counts messages: 3 per message + role + content (+1 + name), 3 to prime the reply', () => {
    const c = new TokenCounter('o200k_base');
    const t = (s: string) => tokens('o200k_base', s);
    const messages = [
      { role: 'system' as const, content: 'You are a helpful assistant.' },
      { role: 'user' as const, name: 'ann', content: 'What is the capital of France?' },
    ];
    const expected =
      3 +
      t('system') +
      t('You are a helpful assistant.') +
      (3 + t('user') + t('What is the capital of France?') + 1 + t('ann')) +
      3;
    expect(c.messages(messages)).toBe(expected);
    expect(c.messages([])).toBe(3);
  });

  it('counts assistant tool calls, tool results, text parts and images', () => {
    const c = new TokenCounter('cl100k_base');
    const t = (s: string) => tokens('cl100k_base', s);
    expect(
      c.messages([
        {
          role: 'assistant',
          content: null,
          tool_calls: [{ id: 'c1', type: 'function', function: { name: 'weather', arguments: '{"city":"Oslo"}' } }],
        },
        { role: 'tool', tool_call_id: 'c1', content: 'sunny' },
        {
          role: 'user',
          content: [
            { type: 'text', text: 'look' },
            { type: 'image_url', image_url: { url: 'https://x/a.png', detail: 'low' } },
            { type: 'image_url', image_url: { url: 'https://x/b.png' } },
          ],
        },
      ]),
    ).toBe(
      3 +
        t('assistant') +
        (3 + t('weather') + t('{"city":"Oslo"}')) +
        (3 + t('tool') + t('sunny') + t('c1')) +
        (3 + t('user') + t('look') + 85 + 765) +
        3,
    );
  });

  it('counts tools the way chat completions renders them (o200k_base: 7 per function, cl100k_base: 10)', () => {
    const tool = {
      type: 'function' as const,
      function: {
        name: 'get_weather',
        description: 'Get the weather.',
        parameters: {
          type: 'object',
          properties: {
            city: { type: 'string', description: 'City name.' },
            unit: { type: 'string', enum: ['celsius', 'fahrenheit'] },
          },
        },
      },
    };
    for (const [name, funcInit] of [
      ['o200k_base', 7],
      ['cl100k_base', 10],
    ] as const) {
      const t = (s: string) => tokens(name, s);
      const expected =
        funcInit +
        t('get_weather:Get the weather') +
        3 +
        (3 + t('city:string:City name')) +
        (3 + -3 + (3 + t('celsius')) + (3 + t('fahrenheit')) + t('unit:string:')) +
        12;
      expect(new TokenCounter(name).tools([tool])).toBe(expected);
    }
    expect(new TokenCounter('o200k_base').tools([])).toBe(0);
  });

  it('counts special-token text as ordinary text instead of throwing', () => {
    const c = new TokenCounter('cl100k_base');
    expect(c.text('<|endoftext|>')).toBe(tokens('cl100k_base', '<|endoftext|>'));
    expect(c.text('<|endoftext|>')).toBeGreaterThan(1);
  });
});
