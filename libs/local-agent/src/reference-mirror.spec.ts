import { compactFrame } from './context/compactor';
import { checkedCounter } from './context/fit';
import { estimateMessageTokens, estimateMessagesTokens, estimateTextTokens } from './context/tokens';
import { computeBudget } from './context/budget';
import type { ChatMessage } from './host-port';
import { boundToolResult } from './tools/results';
import { call, FakeHost, fakeContext, hostError, streaming } from './testing/fake-host';
import { contentOf } from './testing/history-fixtures';
import { runAgent, terminal } from './testing/run-agent';

/*
 * Scenario tests of LangBot's LocalAgent mirrored where they add to the 40 behaviours
 * (docs/local-agent.md#tests); numbers are that suite's.
 */

const MARKER = 'Only the leading content is included.';

describe('local agent — scenario mirrors (docs/local-agent.md#tests)', () => {
  it('a plain answer costs the host one count_tokens and one model call (the audit footprint of a run)', async () => {
    const host = new FakeHost().script('m1', { text: 'hi' });
    await runAgent(host, fakeContext());
    expect(host.calls.map((c) => c.op)).toEqual(['model.count_tokens', 'model.invoke']);
  });

  it('53-57. tool result bounding: short untouched, string head + marker, JSON serialized then cut, error prefix kept', () => {
    expect(boundToolResult('short', null, 100)).toEqual({ content: 'short', payload: null });
    const s = boundToolResult('123456789', null, 4);
    expect(s.content.startsWith('1234\n\n[tool result truncated: original_chars=9, kept_chars=4.')).toBe(true);
    expect(s.content).toContain(MARKER);
    const json = boundToolResult({ alpha: 'beta', gamma: [1, 2, 3] }, null, 18);
    expect(json.content.startsWith(JSON.stringify({ alpha: 'beta', gamma: [1, 2, 3] }).slice(0, 18))).toBe(true);
    const err = boundToolResult(null, 'permission denied for this operation', 24);
    expect(err.content.startsWith('Error: permission denied')).toBe(true);
    expect(err.content).toContain('kept_chars=24');
  });

  it('mixed MCP content reaches the model as text with other blocks named, never their bytes', () => {
    const mixed = {
      is_error: false,
      content: [
        { type: 'text', text: 'chart attached' },
        { type: 'image', data: 'iVBORw0KGgo'.repeat(50), mimeType: 'image/png' },
        { type: 'resource', resource: { uri: 'file:///tmp/r.csv', text: 'a,b' } },
      ],
    };
    expect(boundToolResult(mixed, null, 1000).content).toBe(
      'chart attached\n[image: image/png]\n[resource file:///tmp/r.csv]',
    );
  });

  it('64-65. the estimator is conservative for CJK, symbols and attachments', () => {
    const cjk = estimateTextTokens('漢'.repeat(80));
    expect(cjk).toBeGreaterThanOrEqual(80);
    expect(cjk).toBeGreaterThan(3 * estimateTextTokens('a'.repeat(80)));
    expect(estimateTextTokens('😀'.repeat(16))).toBeGreaterThanOrEqual(16);
    const image: ChatMessage = {
      role: 'user',
      content: [{ type: 'image_url', image_url: { url: 'https://x/y.png' } }],
    };
    expect(estimateMessageTokens(image)).toBeGreaterThanOrEqual(1600);
  });

  it('74. a long RAG block is trimmed before it evicts recent history', async () => {
    const history = [
      { role: 'user', content: 'RECENT-SENTINEL question' },
      { role: 'assistant', content: 'RECENT answer' },
    ];
    const r = await compactFrame(
      {
        prompt: [{ role: 'system', content: 'p' }],
        history,
        rag: [{ role: 'system', content: 'rag '.repeat(400) }],
        current: [{ role: 'user', content: 'now' }],
      },
      {
        budget: computeBudget(
          { window_tokens: 200, reserve_tokens: 0, keep_recent_tokens: 100, summary_tokens: 50 },
          null,
          null,
        ),
        count: checkedCounter((m) => Promise.resolve(estimateMessagesTokens(m))),
        summarize: () => Promise.resolve('<conversation_summary>\nx\n</conversation_summary>'),
      },
    );
    const text = r.messages.map(contentOf);
    expect(text).toContain('RECENT-SENTINEL question');
    expect(text).toContain('RECENT answer');
    expect(r.tokens_after).toBeLessThanOrEqual(200);
    expect(r.messages.at(-1)).toEqual({ role: 'user', content: 'now' });
  });

  it('98. an assembly exception ends the run with one run.failed runner.error carrying its message', async () => {
    const host = new FakeHost().script('m1', { text: 'never' });
    await runAgent(host, fakeContext({}, { prompt: [{ role: 'system', content: { bad: true } }] }));
    expect(host.results).toEqual([
      {
        type: 'run.failed',
        data: {
          error: 'prompt[0].content: must be a string or a list of content elements',
          code: 'runner.error',
          retryable: false,
        },
      },
    ]);
  });

  it('102/15. a tool hitting the run deadline ends the run runner.timeout with the prior model usage', async () => {
    const u = { prompt_tokens: 7, completion_tokens: 3, total_tokens: 10 };
    const host = new FakeHost()
      .script('m1', { tool_calls: [call('c1', 'slow')], usage: u })
      .tool('slow', () =>
        Promise.reject(hostError('deadline_exceeded', 'the run deadline has passed', { reason: 'deadline' })),
      );
    await runAgent(
      host,
      fakeContext({ resources: { ...fakeContext().resources, tools: [{ tool_name: 'slow', parameters: {} }] } }),
    );
    expect(terminal(host)).toEqual([
      {
        type: 'run.failed',
        data: { error: 'the run deadline has passed', code: 'runner.timeout', retryable: true },
        usage: { ...u, model_calls: 1, turns: [u] },
      },
    ]);
  });

  it('105. a cancel mid-stream: the deltas already sent stay, then one run.failed cancelled', async () => {
    const host = new FakeHost().script('m1', { stream: [{ delta: 'Hello' }], hang: true });
    host.onEmit = (r) => {
      if (r.type === 'message.delta') {
        host.abort.abort();
      }
    };
    await runAgent(host, streaming(fakeContext()));
    expect(host.typesOf()).toEqual(['message.delta', 'run.failed']);
    expect(terminal(host)[0]).toMatchObject({ data: { code: 'cancelled', retryable: false } });
  });

  it('113. streaming: an overflow before any output compacts and retries once, then completes', async () => {
    const history = Array.from({ length: 8 }, (_, i) => ({
      role: i % 2 ? 'assistant' : 'user',
      content: `history ${i} `.padEnd(160, 'x'),
      cursor: String(i + 1),
    }));
    const host = new FakeHost().script('m1', { error: new Error('context length exceeded') }, { text: 'answer' });
    host.history = [{ items: [...history].reverse(), has_more: false }];
    const ctx = streaming(
      fakeContext({}, { model: { primary: 'm1' }, 'context-window-tokens': 400, 'context-reserve-tokens': 0 }),
    );
    await runAgent(host, { ...ctx, context: { ...ctx.context, available_apis: { history_page: true } } });
    expect(host.modelRequests).toHaveLength(2);
    expect(host.modelRequests[1].messages.map(contentOf).join()).toContain('<conversation_summary>');
    expect(host.typesOf().at(-1)).toBe('run.completed');
  });

  it('140. streamed reasoning and provider fields are kept on the assistant tool turn for the follow-up request', async () => {
    const host = new FakeHost()
      .script('m1', {
        stream: [
          { reasoning_delta: 'first ', provider_specific_fields: { signature: 'sig-1' } },
          { reasoning_delta: 'second', delta: 'Checking' },
          {
            is_final: true,
            finish_reason: 'tool_calls',
            tool_calls: [
              {
                index: 0,
                id: 'c1',
                function: { name: 'look', arguments: '' },
                provider_specific_fields: { thought: 't1' },
              },
            ],
          },
        ],
      })
      .script('m1', { text: 'Done' })
      .tool('look', () => 'seen');
    await runAgent(
      host,
      streaming(
        fakeContext({ resources: { ...fakeContext().resources, tools: [{ tool_name: 'look', parameters: {} }] } }),
      ),
    );
    const assistant = host.modelRequests[1].messages.find((m) => m.role === 'assistant')!;
    expect(assistant.provider_specific_fields).toEqual({ signature: 'sig-1', reasoning_content: 'first second' });
    expect(assistant.tool_calls).toEqual([
      {
        id: 'c1',
        type: 'function',
        function: { name: 'look', arguments: '' },
        provider_specific_fields: { thought: 't1' },
      },
    ]);
  });
});
