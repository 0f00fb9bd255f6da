import { computeBudget } from './context/budget';
import { compactFrame } from './context/compactor';
import { checkedCounter } from './context/fit';
import { CHECKPOINT_KEY, CHECKPOINT_SCHEMA } from './context/history';
import { sanitizeMessages } from './context/sanitize';
import { llmSummarizer, summarizeMessages, wrapLlmSummary } from './context/summary';
import { estimateMessagesTokens } from './context/tokens';
import type { ChatMessage } from './host-port';
import { isContextOverflow, isContextOverflowText } from './model/overflow';
import { ModelCallError } from './model/model-caller';
import { buildSkillsMessage, skillEntries } from './skills/skill-tools';
import { call, FakeHost, fakeContext, hostError, withApis } from './testing/fake-host';
import { backwardPage, contentOf, historyItems, summaryCount } from './testing/history-fixtures';
import { FIXED_NOW, runAgent, terminal } from './testing/run-agent';

/*
 * Behaviours 11-27 of the local agent (docs/local-agent.md#tests): context budget, compaction,
 * checkpoint, history, prompt, skills.
 */

const budget = (window: number, reserve: number, keep: number, summary: number) =>
  computeBudget(
    { window_tokens: window, reserve_tokens: reserve, keep_recent_tokens: keep, summary_tokens: summary },
    null,
    null,
  );
const estimator = () => checkedCounter((m) => Promise.resolve(estimateMessagesTokens(m)));
const noSummary = () => Promise.resolve('<conversation_summary>\nv=1 test\n</conversation_summary>');
const u = (content: string): ChatMessage => ({ role: 'user', content });
const a = (content: string): ChatMessage => ({ role: 'assistant', content });
const sys = (content: string): ChatMessage => ({ role: 'system', content });

const OVERFLOWS = [
  'prompt is too long: 213462 tokens > 200000 maximum',
  '413 {"error":{"type":"request_too_large","message":"Request exceeds the maximum size"}}',
  "Input length (265330) exceeds model's maximum context length (262144).",
  'context_length_exceeded',
  '400 status code (no body)',
  'input is too long for requested model',
  'The input token count (1196265) exceeds the maximum number of tokens allowed (1048575).',
  "This model's maximum context length is 128000 tokens. However, your messages resulted in 130000 tokens.",
  'Please reduce the length of the messages or completion.',
  'maximum prompt length is 32768',
  'the request exceeds the available context size, try increasing it',
  "This endpoint's maximum context length is 16385 tokens",
  "input (40000 tokens) is longer than the model's context length (32768 tokens)",
  'exceeds the limit of 4096',
  'Requested tokens exceed context window of 8192: context window exceeds limit',
  'model_context_window_exceeded',
  'prompt too long; exceeded max context length by 120 tokens',
  'Trying to keep the first 9000 tokens when context the overflows. context length exceeded',
  'too many tokens in the request',
  'Error: token limit exceeded for this model',
];
const NOT_OVERFLOWS = [
  'Throttling error: Too many tokens, please wait before trying again.',
  'Service unavailable: model is overloaded (tokens exceeded queue)',
  'rate limit reached for requests: tokens per min exceeded',
  '429 Too Many Requests: you have exceeded your token quota',
];

describe('local agent — behaviours 11-27', () => {
  it('11. overflow before any output: exactly one re-compaction at 3/4 of the input budget and one retry; a second overflow fails the run', async () => {
    const items = historyItems(8, (i) => `history message ${i} `.padEnd(160, 'x'));
    const cfg = { model: { primary: 'm1' }, 'context-window-tokens': 400, 'context-reserve-tokens': 0 };
    const ctx = withApis(fakeContext({}, cfg), { history_page: true });
    const ok = new FakeHost().script('m1', { error: new Error('context length exceeded') }, { text: 'answer' });
    ok.history = [backwardPage(items)];
    await runAgent(ok, ctx);
    expect(ok.modelRequests).toHaveLength(2);
    expect(summaryCount(ok.modelRequests[0].messages)).toBe(0);
    expect(summaryCount(ok.modelRequests[1].messages)).toBe(1);
    expect(estimateMessagesTokens(ok.modelRequests[1].messages)).toBeLessThanOrEqual(300); // 3/4 of 400, no reserve
    expect(ok.typesOf()).toEqual(['message.completed', 'run.completed']);

    const twice = new FakeHost().script(
      'm1',
      { error: new Error('context length exceeded') },
      { error: new Error('context length exceeded') },
    );
    twice.history = [backwardPage(items)];
    await runAgent(twice, ctx);
    expect(twice.modelRequests).toHaveLength(2);
    expect(terminal(twice)[0]).toMatchObject({ type: 'run.failed', data: { code: 'runner.llm_error' } });
  });

  it('12. overflow classifier: provider overflow messages are overflow; throttling/rate-limit/429 messages are not', () => {
    for (const m of OVERFLOWS) {
      expect([m, isContextOverflowText(m)]).toEqual([m, true]);
    }
    for (const m of NOT_OVERFLOWS) {
      expect([m, isContextOverflowText(m)]).toEqual([m, false]);
    }
    expect(isContextOverflow(new ModelCallError('All models failed. Last error: context length exceeded', true))).toBe(
      true,
    );
    expect(isContextOverflow({ code: 'context_overflow', message: 'x' })).toBe(true);
  });

  it('13. token budget: window=min(host,config), reserve clamped to window/4, input=window-reserve, summary capped by host max output', () => {
    expect(budget(300, 60, 80, 120)).toMatchObject({ input_tokens: 240, keep_recent_tokens: 80, summary_tokens: 120 });
    const fields = { window_tokens: 300, reserve_tokens: 60, keep_recent_tokens: 80, summary_tokens: 120 };
    expect(computeBudget(fields, 512, null).window_tokens).toBe(300);
    const host8k = computeBudget({ ...fields, window_tokens: 200000, reserve_tokens: 16384 }, 8192, null);
    expect(host8k).toMatchObject({ reserve_tokens: 2048, input_tokens: 6144 });
    const capped = computeBudget(
      { ...fields, window_tokens: 200000, reserve_tokens: 10000, summary_tokens: 8000 },
      32000,
      4096,
    );
    expect(capped).toMatchObject({ reserve_tokens: 8000, summary_tokens: 4096 });
    expect(budget(0, 100, 10, 10)).toMatchObject({ enabled: false, input_tokens: 0 });
  });

  it('14. no host token counter or an invalid count → fails closed before any model call; counts never include tool schemas', async () => {
    const none = new FakeHost().script('m1', { text: 'never' });
    none.counter = null;
    await runAgent(none, fakeContext());
    expect(none.modelRequests).toEqual([]);
    expect(terminal(none)).toEqual([
      {
        type: 'run.failed',
        data: {
          error: 'Host count_tokens API is required for local-agent context budgeting: model has no tokenizer',
          code: 'runner.error',
          retryable: false,
        },
      },
    ]);

    const invalid = new FakeHost().script('m1', { text: 'never' });
    invalid.counter = () => -1;
    await runAgent(invalid, fakeContext());
    expect(invalid.modelRequests).toEqual([]);
    expect(terminal(invalid)[0]).toMatchObject({
      data: { error: 'Host count_tokens API returned invalid token count', code: 'runner.error' },
    });

    const tools = new FakeHost().script('m1', { text: 'ok' }).tool('t', () => 'x');
    await runAgent(
      tools,
      fakeContext({ resources: { ...fakeContext().resources, tools: [{ tool_name: 't', parameters: {} }] } }),
    );
    expect(tools.callsOf('model.count_tokens').length).toBeGreaterThan(0);
    for (const c of tools.callsOf('model.count_tokens')) {
      expect((c as { tools: unknown[] }).tools).toEqual([]);
    }
  });

  it('15. over budget: older history becomes one <conversation_summary> right after the prompt; recent messages verbatim; current input last', async () => {
    const history = Array.from({ length: 10 }, (_, i) => (i % 2 ? a : u)(`turn ${i} sentinel-${i} `.padEnd(120, '.')));
    const r = await compactFrame(
      { prompt: [sys('be brief')], history, rag: [], current: [u('current question')] },
      {
        budget: budget(300, 0, 80, 120),
        count: estimator(),
        summarize: (om, max) => Promise.resolve(summarizeMessages(om, max)),
      },
    );
    expect(r.compacted).toBe(true);
    expect(r.messages[0]).toEqual(sys('be brief'));
    expect(contentOf(r.messages[1])).toContain('<conversation_summary>');
    expect(contentOf(r.messages[1])).toContain('turn 0 sentinel-0');
    expect(contentOf(r.messages.at(-2))).toContain('sentinel-9');
    expect(r.messages.at(-1)).toEqual(u('current question'));
    expect(summaryCount(r.messages)).toBe(1);
    expect(r.tokens_after).toBeLessThanOrEqual(300);
  });

  it('16. the cut never leaves a leading orphan tool result: a tool call and its results are kept or dropped as a unit', async () => {
    const history: ChatMessage[] = [
      u('old question '.padEnd(200, 'q')),
      { role: 'assistant', content: '', tool_calls: [call('t1', 'lookup')] },
      { role: 'tool', tool_call_id: 't1', content: 'tool output '.padEnd(200, 'o') },
      a('short'),
    ];
    const r = await compactFrame(
      { prompt: [sys('p')], history, rag: [], current: [u('now')] },
      { budget: budget(100, 0, 70, 40), count: estimator(), summarize: noSummary },
    );
    expect(r.compacted).toBe(true);
    expect(r.omitted).toEqual([history[0]]); // the cut fell on the tool result: moved back to its call
    const kept = r.messages.slice(2, -1);
    expect(kept[0]?.role).not.toBe('tool');
    for (const [i, m] of r.messages.entries()) {
      if (m.role === 'tool') {
        expect(r.messages[i - 1].role === 'tool' || (r.messages[i - 1].tool_calls?.length ?? 0) > 0).toBe(true);
      }
    }
  });

  it('17. an existing summary is re-summarized with <previous-summary> instead of stacking: exactly one summary message', async () => {
    const prompts: string[] = [];
    const summarize = llmSummarizer((messages) => {
      prompts.push(contentOf(messages[1]));
      return Promise.resolve('## Goal\nkeep old_sentinel_value_42 and new work');
    });
    const old = sys(
      '<conversation_summary>\nv=1 source=llm count=3\nold_sentinel_value_42 noted\n</conversation_summary>',
    );
    const history = [old, ...Array.from({ length: 8 }, (_, i) => u(`new message ${i} `.padEnd(150, '-')))];
    const r = await compactFrame(
      { prompt: [sys('p')], history, rag: [], current: [u('current')] },
      { budget: budget(300, 0, 60, 150), count: estimator(), summarize },
    );
    expect(prompts).toHaveLength(1);
    expect(prompts[0]).toContain('<previous-summary>');
    expect(prompts[0]).toContain('old_sentinel_value_42');
    expect(prompts[0]).toContain('new message 0');
    expect(summaryCount(r.messages)).toBe(1);
    const text = r.messages.map(contentOf).join('\n');
    expect(text.match(/<conversation_summary>/g)).toHaveLength(1);
    expect(text.match(/<\/conversation_summary>/g)).toHaveLength(1);
  });

  it('18. summaries keep full identifiers in <critical_refs> and file paths in <files> even when the body is truncated', () => {
    const omitted: ChatMessage[] = [
      u('请记住这个口令 qa_compaction_sentinel_7391 '.padEnd(400, '长')),
      { role: 'tool', tool_call_id: 'x', content: JSON.stringify({ path: '/workspace/notes.md', note: 'saved' }) },
    ];
    const det = summarizeMessages(omitted, 105);
    expect(det).toContain('qa_compaction_sentinel_7391');
    expect(det).toContain('<critical_refs>');
    expect(det).toContain('- path=/workspace/notes.md');
    expect(det.split('qa_compaction_s').length - 1).toBe(det.split('qa_compaction_sentinel_7391').length - 1);

    const llm = wrapLlmSummary(`## Goal\n${'x'.repeat(600)} qa_compaction_s`, omitted, 105);
    expect(llm).toContain('- qa_compaction_sentinel_7391');
    expect(llm).toContain('source=llm');
  });

  it('19. LLM summaries use the primary model, no tools and the remove_think flag; error or empty output falls back to the deterministic summary', async () => {
    const items = historyItems(10, (i) => `history ${i} `.padEnd(200, 'h'));
    const cfg = { 'context-window-tokens': 400, 'context-reserve-tokens': 0, 'remove-think': true };
    const host = new FakeHost().script('m1', { text: 'ok' });
    host.history = [backwardPage(items)];
    await runAgent(host, withApis(fakeContext({}, cfg), { history_page: true }));
    const summaryCalls = host
      .callsOf('model.invoke')
      .filter((c) => contentOf((c as { messages: ChatMessage[] }).messages[0]).includes('context summarization'));
    expect(summaryCalls).toHaveLength(1);
    expect(summaryCalls[0]).toMatchObject({ model_id: 'm1', tools: [], remove_think: true });
    expect(summaryCount(host.modelRequests[0].messages)).toBe(1);
    expect(host.modelRequests[0].messages.map(contentOf).join()).toContain('source=llm');

    for (const failing of [async () => Promise.reject(new Error('down')), async () => Promise.resolve('  ')]) {
      const s = await llmSummarizer(failing)([u('qa_compaction_sentinel_7391 hello')], 200);
      expect(s).toContain('v=v1 count=1');
      expect(s).toContain('qa_compaction_sentinel_7391');
    }
  });

  it('20. under an extreme budget the final fit keeps the current input (or the current tool turn) last, within the input budget', async () => {
    const plus12 = checkedCounter((m) => Promise.resolve(estimateMessagesTokens(m) + 12 * m.length));
    const r = await compactFrame(
      {
        prompt: [sys('a very long system prompt '.repeat(40))],
        history: [u('old '.repeat(50)), a('older answer '.repeat(30))],
        rag: [sys('retrieved '.repeat(60))],
        current: [u('CURRENT-SENTINEL keep me')],
      },
      { budget: budget(45, 20, 10, 10), count: plus12, summarize: noSummary },
    );
    expect(r.messages.length).toBeGreaterThan(0);
    expect(r.messages.at(-1)?.role).toBe('user');
    expect(contentOf(r.messages.at(-1))).toContain('CURRENT-SENTINEL');
    expect(r.tokens_after).toBeLessThanOrEqual(25);

    const toolTurn = await compactFrame(
      {
        prompt: [sys('prompt '.repeat(200))],
        history: [],
        rag: [],
        current: [
          { role: 'assistant', content: '', tool_calls: [call('c1', 'lookup')] },
          { role: 'tool', tool_call_id: 'c1', content: 'result '.repeat(100) },
        ],
      },
      { budget: budget(150, 0, 10, 10), count: estimator(), summarize: noSummary },
    );
    expect(toolTurn.messages.at(-1)?.role).toBe('tool');
    expect(toolTurn.messages.at(-2)?.tool_calls?.[0].id).toBe('c1');
    expect(toolTurn.tokens_after).toBeLessThanOrEqual(150);
  });

  it('21. provider sanitizer: orphan tool results dropped, calls without adjacent results removed, non-text/non-media blocks removed', () => {
    const out = sanitizeMessages([
      { role: 'tool', tool_call_id: 'orphan', content: 'x' },
      u('q'),
      { role: 'assistant', content: '', tool_calls: [call('legal', 'a'), call('dangling', 'b')] },
      { role: 'tool', tool_call_id: 'legal', content: 'ok' },
      { role: 'assistant', content: 'text stays', tool_calls: [call('never', 'c')] },
      {
        role: 'assistant',
        content: [
          { type: 'reasoning_content', text: 'hidden' },
          { type: 'text', text: 'visible' },
        ],
      },
      { role: 'user', content: [{ type: 'tool_result', content: 'x' }] },
      { role: 'command', content: 'dropped role' },
    ]);
    expect(out).toEqual([
      u('q'),
      { role: 'assistant', content: '', tool_calls: [call('legal', 'a')] },
      { role: 'tool', tool_call_id: 'legal', content: 'ok' },
      { role: 'assistant', content: 'text stays', tool_calls: null },
      { role: 'assistant', content: [{ type: 'text', text: 'visible' }] },
    ]);
    // What the host's chat mapping accepts: developer is a system instruction, media only in user
    // messages, and a user file element is named in text rather than refused.
    expect(
      sanitizeMessages([
        { role: 'developer', content: 'dev rules' },
        {
          role: 'system',
          content: [
            { type: 'text', text: 'sys' },
            { type: 'image_url', image_url: { url: 'u' } },
          ],
        },
        {
          role: 'user',
          content: [
            { type: 'image_base64', image_base64: 'AAAA' },
            { type: 'file_url', file_url: 'https://f', file_name: 'a.pdf' },
          ],
        },
      ]),
    ).toEqual([
      { role: 'system', content: 'dev rules' },
      { role: 'system', content: [{ type: 'text', text: 'sys' }] },
      {
        role: 'user',
        content: [
          { type: 'image_base64', image_base64: 'AAAA' },
          { type: 'text', text: '[file:a.pdf]' },
        ],
      },
    ]);
  });

  it('22. compaction runs before every follow-up model call, with the previous turn usage as the trigger anchor', async () => {
    const items = historyItems(6, (i) => `short history ${i}`);
    const cfg = {
      'context-window-tokens': 2000,
      'context-reserve-tokens': 0,
      'context-keep-recent-tokens': 30,
      'context-summary-tokens': 4000,
    };
    const host = new FakeHost()
      .script('m1', {
        tool_calls: [call('c1', 'lookup')],
        usage: { prompt_tokens: 4990, completion_tokens: 10, total_tokens: 5000 },
      })
      .script('m1', { text: 'done' })
      .tool('lookup', () => 'tool result');
    host.history = [backwardPage(items)];
    const ctx = withApis(
      fakeContext({ resources: { ...fakeContext().resources, tools: [{ tool_name: 'lookup', parameters: {} }] } }, cfg),
      { history_page: true },
    );
    await runAgent(host, ctx);
    expect(summaryCount(host.modelRequests[0].messages)).toBe(0); // by estimate the context fits
    expect(summaryCount(host.modelRequests[1].messages)).toBe(1); // the provider said 5000 tokens
    expect(host.modelRequests[1].messages.at(-1)).toMatchObject({ role: 'tool', tool_call_id: 'c1' });
  });

  it('23. checkpoint: a compacting assembly writes runner.compaction.checkpoint; the next run injects it and pages forward from covers_until', async () => {
    const items = historyItems(5, (i) => `long history ${i} `.padEnd(300, 'z'));
    const cfg = { 'context-window-tokens': 300, 'context-reserve-tokens': 0, 'context-keep-recent-tokens': 80 };
    const ctx = withApis(fakeContext({}, cfg), { history_page: true, state: true });
    const first = new FakeHost().script('m1', { text: 'ok' });
    first.history = [backwardPage(items)];
    await runAgent(first, ctx);
    const writes = first.callsOf('state.set') as { scope: string; key: string; value: Record<string, unknown> }[];
    expect(writes).toHaveLength(1);
    expect(writes[0]).toMatchObject({ scope: 'conversation', key: CHECKPOINT_KEY });
    expect(writes[0].value).toMatchObject({ schema_version: CHECKPOINT_SCHEMA, conversation_id: 'conv-1' });
    expect(writes[0].value.covers_until).toMatch(/^cursor-[1-5]$/);
    expect(contentOf({ role: 'system', content: writes[0].value.summary as string })).toContain(
      '<conversation_summary>',
    );
    expect(typeof writes[0].value.tokens_before).toBe('number');
    expect(writes[0].value.created_at).toBe(Math.floor(FIXED_NOW.getTime() / 1000));

    const second = new FakeHost().script('m1', { text: 'ok' });
    second.state = new Map(first.state);
    second.history = [
      {
        items: [{ role: 'user', content: 'after checkpoint', cursor: 'cursor-6' }],
        has_more: true,
        next_cursor: 'cursor-6',
      },
      { items: [{ role: 'assistant', content: 'latest', cursor: 'cursor-7' }], has_more: false },
    ];
    await runAgent(
      second,
      withApis(fakeContext({}, { 'context-window-tokens': 100000 }), { history_page: true, state: true }),
    );
    expect(second.callsOf('history.page')).toEqual([
      { conversation_id: 'conv-1', limit: 50, direction: 'forward', after_cursor: writes[0].value.covers_until },
      { conversation_id: 'conv-1', limit: 50, direction: 'forward', after_cursor: 'cursor-6' },
    ]);
    const sent = second.modelRequests[0].messages.map(contentOf);
    expect(sent).toEqual([
      'You are a helpful assistant.',
      writes[0].value.summary,
      'after checkpoint',
      'latest',
      'hello',
    ]);
    expect(second.callsOf('state.set')).toEqual([]);
  });

  it('24. history: one backward page of context-history-fetch-limit, reversed, current event skipped, content_json preferred; no call without the API or a conversation', async () => {
    const host = new FakeHost().script('m1', { text: 'ok' });
    host.history = [
      {
        items: [
          { event_id: 'ev-1', role: 'user', content: 'hello', cursor: '3' },
          {
            event_id: 'e2',
            role: 'assistant',
            content: 'summary text',
            content_json: { role: 'assistant', content: 'previous answer' },
            cursor: '2',
          },
          { event_id: 'e1', role: 'user', content: 'previous question', cursor: '1' },
        ],
        has_more: true,
      },
    ];
    await runAgent(host, withApis(fakeContext({}, { 'context-history-fetch-limit': 7 }), { history_page: true }));
    expect(host.callsOf('history.page')).toEqual([{ conversation_id: 'conv-1', limit: 7, direction: 'backward' }]);
    expect(host.modelRequests[0].messages).toEqual([
      { role: 'system', content: 'You are a helpful assistant.' },
      { role: 'user', content: 'previous question' },
      { role: 'assistant', content: 'previous answer' },
      { role: 'user', content: 'hello' },
    ]);

    const noApi = new FakeHost().script('m1', { text: 'ok' });
    await runAgent(noApi, fakeContext());
    const noConversation = new FakeHost().script('m1', { text: 'ok' });
    await runAgent(
      noConversation,
      withApis(fakeContext({ conversation: null, context: { available_apis: {} } }), { history_page: true }),
    );
    expect([...noApi.callsOf('history.page'), ...noConversation.callsOf('history.page')]).toEqual([]);
  });

  it('25. prompt: the host effective prompt replaces the static prompt; an explicitly empty host prompt stays empty (LP)', async () => {
    const host = new FakeHost().script('m1', { text: 'ok' });
    host.prompt = [sys('Host effective prompt')];
    await runAgent(host, withApis(fakeContext({}, { prompt: [sys('static')] }), { prompt_get: true }));
    expect(host.callsOf('prompt.get')).toHaveLength(1);
    expect(host.modelRequests[0].messages).toEqual([sys('Host effective prompt'), u('hello')]);

    const empty = new FakeHost().script('m1', { text: 'ok' });
    empty.prompt = [];
    await runAgent(empty, withApis(fakeContext({}, { prompt: [sys('static')] }), { prompt_get: true }));
    expect(empty.modelRequests[0].messages).toEqual([u('hello')]);

    const noApi = new FakeHost().script('m1', { text: 'ok' });
    await runAgent(noApi, fakeContext({}, { prompt: [sys('static')] }));
    expect(noApi.modelRequests[0].messages).toEqual([sys('static'), u('hello')]);
  });

  it('26. date grounding (default on): the first system message gets the UTC date and the search advice; created when absent; config untouched; false disables', async () => {
    const cfg = { prompt: [sys('Custom prompt')], 'date-grounding': true };
    const snapshot = structuredClone(cfg);
    const host = new FakeHost().script('m1', { text: 'ok' });
    await runAgent(host, fakeContext({}, cfg));
    const first = contentOf(host.modelRequests[0].messages[0]);
    expect(first).toContain('Custom prompt');
    expect(first).toContain('Current date: 2026-12-01');
    expect(first).toContain('UTC');
    expect(first).toContain('verify with a search tool if one is available');
    expect(cfg).toEqual(snapshot);

    const none = new FakeHost().script('m1', { text: 'ok' });
    none.prompt = [];
    const defaults = fakeContext();
    delete defaults.config!['date-grounding'];
    await runAgent(none, withApis(defaults, { prompt_get: true }));
    expect(none.modelRequests[0].messages.map((m) => m.role)).toEqual(['system', 'user']);
    expect(contentOf(none.modelRequests[0].messages[0])).toMatch(/^Current date: /);

    const off = new FakeHost().script('m1', { text: 'ok' });
    await runAgent(off, fakeContext({}, { 'date-grounding': false }));
    expect(off.modelRequests[0].messages.map(contentOf).join()).not.toContain('Current date:');
  });

  it('27. skills: resources.skills → one system message with an escaped <available_skills> index (order kept, description optional) and the activate instruction; none → no message', async () => {
    const host = new FakeHost().script('m1', { text: 'ok' });
    const ctx = fakeContext({
      resources: {
        ...fakeContext().resources,
        skills: [{ skill_name: 'pdf', description: 'Read <PDF> & "forms"\nfast' }, { skill_name: 'plain' }],
      },
    });
    await runAgent(host, ctx);
    const msg = host.modelRequests[0].messages[1];
    expect(msg.role).toBe('system');
    const text = contentOf(msg);
    expect(text).toContain('`activate`');
    expect(text).toContain('<available_skills>');
    expect(text).toContain('<description>Read &lt;PDF&gt; &amp; &quot;forms&quot; fast</description>');
    expect(text.indexOf('<name>pdf</name>')).toBeLessThan(text.indexOf('<name>plain</name>'));
    expect(text).not.toContain('<name>plain</name>\n    <description>');
    expect(buildSkillsMessage(skillEntries([], []))).toBeNull();
    expect(buildSkillsMessage(skillEntries(undefined, []))).toBeNull();
    expect(hostError('unauthorized').code).toBe('unauthorized');
  });
});
