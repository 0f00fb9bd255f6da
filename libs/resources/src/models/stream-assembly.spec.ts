import type { ChatCompletionChunk } from 'openai/resources/chat/completions';
import { StreamAssembler, ThinkFilter, ToolCallAssembler } from './stream-assembly';

const chunk = (delta: object, finish: string | null = null, usage?: object): ChatCompletionChunk =>
  ({
    id: 'c',
    object: 'chat.completion.chunk',
    created: 0,
    model: 'm',
    choices: [{ index: 0, delta, finish_reason: finish, logprobs: null }],
    ...(usage ? { usage } : {}),
  }) as ChatCompletionChunk;

describe('ThinkFilter', () => {
  const run = (pieces: string[]) => {
    const f = new ThinkFilter();
    return pieces.map((p) => f.push(p)).join('') + f.flush();
  };

  it.each([
    [['<think>a</think>b'], 'b'],
    [['<', 't', 'h', 'i', 'n', 'k', '>', 'x', '<', '/', 't', 'hink>', ' ', 'done'], 'done'],
    [['Hello <thi', 'nk>x</th', 'ink> world'], 'Hello world'],
    [['a <b> c'], 'a <b> c'],
    [['<thinking>kept</thinking>'], '<thinking>kept</thinking>'],
    [['answer <th'], 'answer <th'],
    [['<think>never closed'], ''],
    [['\n\n  lead'], 'lead'],
  ])('%j → %j', (pieces, out) => {
    expect(run(pieces)).toBe(out);
  });

  it('holds back only what may be a tag', () => {
    const f = new ThinkFilter();
    expect(f.push('abc <th')).toBe('abc ');
    expect(f.push('en')).toBe('<then');
  });
});

describe('ToolCallAssembler', () => {
  it('assembles fragments per index; a late id is adopted; missing ids are generated', () => {
    const a = new ToolCallAssembler();
    a.push([{ index: 0, id: 'call-real', type: 'function', function: { name: 'f', arguments: '{"a"' } }]);
    a.push([{ index: 1, function: { name: 'g', arguments: '{' } }]);
    a.push([{ index: 0, id: '', function: { arguments: ': 1}' } }]);
    a.push([{ index: 1, function: { arguments: '}' } }]);
    const [first, second] = a.result() as any[];
    expect(first).toEqual({ id: 'call-real', type: 'function', function: { name: 'f', arguments: '{"a": 1}' } });
    expect(second.function).toEqual({ name: 'g', arguments: '{}' });
    expect(second.id).toMatch(/^call_[0-9a-f]{24}$/);
  });

  it('a different id at a used index starts a new call (parallel calls sent one at a time at index 0)', () => {
    const a = new ToolCallAssembler();
    a.push([{ index: 0, id: 'call-read-a', function: { name: 'read', arguments: '{"p":"a"}' } }]);
    a.push([{ index: 0, id: 'call-read-b', function: { name: 'read', arguments: '{"p":"b"}' } }]);
    expect(a.result().map((c) => c.id)).toEqual(['call-read-a', 'call-read-b']);
  });
});

describe('StreamAssembler', () => {
  it('sends text chunks, keeps usage, and ends with the final chunk carrying all_content', () => {
    const s = new StreamAssembler(false);
    expect(s.push(chunk({ role: 'assistant', content: '' }))).toBeNull();
    expect(s.push(chunk({ content: 'Hi' }))).toEqual({
      role: 'assistant',
      content: 'Hi',
      is_final: false,
      msg_sequence: 1,
    });
    expect(s.push(chunk({ reasoning_content: 'hmm' }))).toMatchObject({ content: '', reasoning_content: 'hmm' });
    expect(s.finished).toBe(false);
    expect(s.push(chunk({}, 'stop'))).toBeNull();
    expect(s.finished).toBe(true);
    expect(
      s.push({ ...chunk({}), choices: [], usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 } }),
    ).toBeNull();
    expect(s.usage).toEqual({ prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 });
    expect(s.final()).toEqual({
      role: 'assistant',
      content: '',
      all_content: 'Hi',
      is_final: true,
      msg_sequence: 3,
      provider_specific_fields: { finish_reason: 'stop' },
    });
  });

  it('with remove_think drops reasoning_content and think blocks', () => {
    const s = new StreamAssembler(true);
    expect(s.push(chunk({ reasoning_content: 'private' }))).toBeNull();
    expect(s.push(chunk({ content: '<think>x</think>' }))).toBeNull();
    expect(s.push(chunk({ content: 'Yes' }))).toEqual({
      role: 'assistant',
      content: 'Yes',
      is_final: false,
      msg_sequence: 1,
    });
    expect(s.final()).toMatchObject({ content: '', all_content: 'Yes', is_final: true });
  });
});
