import { runnerManifestSchema, validateRunnerConfig } from '@libs/protocol';
import { knowledgeBaseIds, parseAgentConfig, rerankConfig, staticPrompt } from './config';
import { buildUserMessage } from './context/messages';
import { LOCAL_AGENT_CONFIG_SCHEMA, LOCAL_AGENT_MANIFEST } from './manifest';
import { ToolCallAccumulator } from './model/tool-call-accumulator';

/*
 * Config, the manifest, user messages and tool-call deltas (docs/local-agent.md: Configuration, The
 * user message, Tool-call fragments).
 */

const FIELDS = [
  'model',
  'timeout',
  'prompt',
  'remove-think',
  'knowledge-bases',
  'date-grounding',
  'retrieval-top-k',
  'rerank-model',
  'rerank-top-k',
  'max-tool-iterations',
  'tool-execution-mode',
  'max-tool-result-chars',
  'context-history-fetch-limit',
  'context-window-tokens',
  'context-reserve-tokens',
  'context-keep-recent-tokens',
  'context-summary-tokens',
  'approval-tools',
  'approval-sources',
  'approval-expires-in',
];

describe('local agent config and manifest', () => {
  it('the manifest is a valid protocol manifest with the capabilities, permissions and every config field with its default', () => {
    expect(runnerManifestSchema.safeParse(LOCAL_AGENT_MANIFEST).success).toBe(true);
    expect(LOCAL_AGENT_MANIFEST.id).toBe('builtin:local-agent/default');
    expect(LOCAL_AGENT_MANIFEST.capabilities).toEqual({
      streaming: true,
      tool_calling: true,
      knowledge_retrieval: true,
      multimodal_input: true,
      steering: true,
      interrupt: true,
      self_managed_context: true,
      // Tool approval asks through structured interactions (docs/interactions.md#tool-approval-local-agent).
      interactions: true,
    });
    expect(LOCAL_AGENT_MANIFEST.permissions.interactions).toEqual(['request']);
    expect(LOCAL_AGENT_MANIFEST.permissions.models).toEqual(['invoke', 'stream', 'count_tokens', 'rerank']);
    expect(LOCAL_AGENT_CONFIG_SCHEMA.map((i) => i.name)).toEqual(FIELDS);
    const defaults = Object.fromEntries(LOCAL_AGENT_CONFIG_SCHEMA.map((i) => [i.name, i.default]));
    expect(defaults).toMatchObject({
      timeout: 300,
      'date-grounding': true,
      'retrieval-top-k': 5,
      'rerank-top-k': 5,
      'max-tool-iterations': 100,
      'tool-execution-mode': 'parallel',
      'max-tool-result-chars': 20000,
      'context-history-fetch-limit': 50,
      'context-window-tokens': 200000,
      'context-reserve-tokens': 16384,
      'context-keep-recent-tokens': 20000,
      'context-summary-tokens': 8000,
    });
    // The defaults pass the host's config check, and a wrong value is named by field and rule.
    const valid = { ...defaults, model: { primary: 'm1', fallbacks: [] } };
    expect(validateRunnerConfig(valid, LOCAL_AGENT_CONFIG_SCHEMA)).toEqual([]);
    expect(validateRunnerConfig({ ...valid, 'tool-execution-mode': 'eager' }, LOCAL_AGENT_CONFIG_SCHEMA)).toEqual([
      'runner_config.tool-execution-mode: must be one of "parallel", "serial"',
    ]);
  });

  it('parses defensively: a wrong type never fails, it falls back to the default', () => {
    const c = parseAgentConfig({
      'retrieval-top-k': 0,
      'max-tool-iterations': '7',
      'max-tool-result-chars': '1234',
      'remove-think': 'true',
      'tool-execution-mode': true,
      'context-window-tokens': -5,
      'context-window-chars': 10,
    });
    expect(c).toMatchObject({
      'retrieval-top-k': 5,
      'max-tool-iterations': 100,
      'max-tool-result-chars': 20000,
      'remove-think': false,
      'tool-execution-mode': 'parallel',
      'context-window-tokens': 200000,
    });
    expect(c).not.toHaveProperty('context-window-chars');
    expect(parseAgentConfig('nonsense').timeout).toBe(300);
    expect(parseAgentConfig({ 'tool-execution-mode': 'serial', 'max-tool-iterations': 7 })).toMatchObject({
      'tool-execution-mode': 'serial',
      'max-tool-iterations': 7,
    });
  });

  it('knowledge bases and rerank: authorized, deduped, __none__ skipped; the singular key is ignored', () => {
    const kb = (v: unknown) => knowledgeBaseIds(parseAgentConfig({ 'knowledge-bases': v }), new Set(['kb1', 'kb2']));
    expect(kb(['kb2', '__none__', 'kb1', 'kb2', 'other'])).toEqual(['kb2', 'kb1']);
    expect(kb(null)).toEqual([]);
    expect(knowledgeBaseIds(parseAgentConfig({ 'knowledge-base': 'kb1' }), new Set(['kb1']))).toEqual([]);
    expect(rerankConfig(parseAgentConfig({}))).toEqual({ model: null, topK: 5 });
    expect(rerankConfig(parseAgentConfig({ 'rerank-model': 'rerank-1', 'rerank-top-k': 2 }))).toEqual({
      model: 'rerank-1',
      topK: 2,
    });
    expect(rerankConfig(parseAgentConfig({ 'rerank-model': '__none__', 'rerank-top-k': 2 }))).toEqual({
      model: null,
      topK: 2,
    });
    expect(rerankConfig(parseAgentConfig({ 'rerank-model': 'rerank-1', 'rerank-top-k': 0 }))).toEqual({
      model: 'rerank-1',
      topK: 5,
    });
  });

  it('static prompt (LP): strings, lists and names kept; malformed content is an error', () => {
    expect(staticPrompt(parseAgentConfig({}))).toEqual([{ role: 'system', content: 'You are a helpful assistant.' }]);
    const list = [{ type: 'text', text: 'be brief' }];
    expect(
      staticPrompt(
        parseAgentConfig({
          prompt: [
            { role: 'assistant', content: '' },
            { content: list, name: 'sys' },
          ],
        }),
      ),
    ).toEqual([
      { role: 'assistant', content: '' },
      { role: 'system', content: list, name: 'sys' },
    ]);
    expect(() => staticPrompt(parseAgentConfig({ prompt: [{ role: 'system', content: { bad: 1 } }] }))).toThrow(
      'prompt[0].content',
    );
  });

  it('user messages keep multimodal contents and render attachments as untrusted reference JSON', () => {
    const m = buildUserMessage({
      text: 'look',
      contents: [
        { type: 'image_base64', image_base64: 'AAAA' },
        { type: 'text', text: 'caption' },
      ],
      attachments: [{ type: 'file', name: 'a.pdf', size: 2048, path: '/in/a.pdf', content: 'x'.repeat(2048) }],
    });
    const content = m?.content as { type: string; text?: string }[];
    expect(content.map((c) => c.type)).toEqual(['text', 'image_base64', 'text', 'text']);
    expect(JSON.parse(content[3].text!)).toMatchObject({
      type: 'langbot_input_attachments',
      trust: 'untrusted_reference_data',
      attachments: [
        {
          type: 'file',
          name: 'a.pdf',
          size_bytes: 2048,
          path: '/in/a.pdf',
          inline_content_omitted: true,
          inline_content_chars: 2048,
        },
      ],
    });
    expect(buildUserMessage({ text: 'plain' })).toEqual({ role: 'user', content: 'plain' });
    expect(buildUserMessage({ text: '' })).toBeNull();
  });

  it('tool-call deltas: a later fragment without id continues the call; distinct ids at the same position stay separate', () => {
    const acc = new ToolCallAccumulator();
    acc.push([{ index: 0, id: 'call-real', function: { name: 'f', arguments: '{"a"' } }]);
    acc.push([{ index: 0, id: '', function: { arguments: ': 1}' } }]);
    expect(acc.result()).toEqual([
      { id: 'call-real', type: 'function', function: { name: 'f', arguments: '{"a": 1}' } },
    ]);

    const two = new ToolCallAccumulator();
    two.push([{ id: 'call-read-a', function: { name: 'read', arguments: '{"p":"a"}' } }]);
    two.push([{ id: 'call-read-b', function: { name: 'read', arguments: '{"p":"b"}' } }]);
    expect(two.result().map((c) => [c.id, c.function.arguments])).toEqual([
      ['call-read-a', '{"p":"a"}'],
      ['call-read-b', '{"p":"b"}'],
    ]);
    const raw = new ToolCallAccumulator();
    raw.push([{ function: { name: 'x' } }, { function: { name: 'y' } }]);
    const ids = raw.result().map((c) => c.id);
    expect(ids[0]).toMatch(/^call_[0-9a-f]{32}$/);
    expect(ids[0]).not.toBe(ids[1]);
  });
});
