import {
  BUILTIN_LOCAL_AGENT_ID,
  runnerManifestSchema,
  type ConfigSchemaItem,
  type RunnerManifest,
} from '@libs/protocol';
import { DEFAULTS } from './config';

const en = (text: string) => ({ en_US: text });

/** The config_schema of the local agent: every field of docs/local-agent.md#configuration with its default. */
export const LOCAL_AGENT_CONFIG_SCHEMA: ConfigSchemaItem[] = [
  {
    name: 'model',
    type: 'model-fallback-selector',
    label: en('Model'),
    description: en('Primary model and ordered fallbacks; fallbacks are tried only before the first visible output.'),
    required: true,
    default: { primary: '', fallbacks: [] },
  },
  {
    name: 'timeout',
    type: 'integer',
    label: en('Run timeout (seconds)'),
    description: en(
      'Wall-clock limit of the whole run; 0 disables the local deadline (the host deadline still applies).',
    ),
    default: DEFAULTS.timeout,
  },
  {
    name: 'prompt',
    type: 'prompt-editor',
    label: en('Prompt'),
    description: en('Static prompt, used when the host has no effective prompt for the agent.'),
    default: [{ role: 'system', content: 'You are a helpful assistant.' }],
  },
  {
    name: 'remove-think',
    type: 'boolean',
    label: en('Remove thinking'),
    description: en('Ask the host to strip <think> blocks from model output.'),
    default: DEFAULTS['remove-think'],
  },
  {
    name: 'knowledge-bases',
    type: 'knowledge-base-multi-selector',
    label: en('Knowledge bases'),
    description: en('Knowledge bases retrieved for every request (only authorized ones are used).'),
    default: [],
  },
  {
    name: 'date-grounding',
    type: 'boolean',
    label: en('Date grounding'),
    description: en('Add the current UTC date to the system prompt.'),
    default: DEFAULTS['date-grounding'],
  },
  {
    name: 'retrieval-top-k',
    type: 'integer',
    label: en('Retrieval top-k'),
    description: en('Chunks requested per knowledge base; also the global cap without a rerank model.'),
    default: DEFAULTS['retrieval-top-k'],
  },
  {
    name: 'rerank-model',
    type: 'rerank-model-selector',
    label: en('Rerank model'),
    description: en('Optional rerank model for retrieved chunks.'),
    default: '',
  },
  {
    name: 'rerank-top-k',
    type: 'integer',
    label: en('Rerank top-k'),
    description: en('Chunks kept after reranking (global cap when a rerank model is set).'),
    default: DEFAULTS['rerank-top-k'],
  },
  {
    name: 'max-tool-iterations',
    type: 'integer',
    label: en('Max tool iterations'),
    description: en('Tool batches one run may execute; then the run ends with a notice.'),
    default: DEFAULTS['max-tool-iterations'],
  },
  {
    name: 'tool-execution-mode',
    type: 'select',
    label: en('Tool execution mode'),
    description: en('Run the tool calls of one model turn in parallel or one after another.'),
    default: DEFAULTS['tool-execution-mode'],
    options: [
      { name: 'parallel', label: en('Parallel') },
      { name: 'serial', label: en('Serial') },
    ],
  },
  {
    name: 'max-tool-result-chars',
    type: 'integer',
    label: en('Max tool result characters'),
    description: en('Longer tool results reach the model as a bounded preview.'),
    default: DEFAULTS['max-tool-result-chars'],
  },
  {
    name: 'context-history-fetch-limit',
    type: 'integer',
    label: en('History fetch limit'),
    description: en('Transcript items fetched per history page.'),
    default: DEFAULTS['context-history-fetch-limit'],
  },
  {
    name: 'context-window-tokens',
    type: 'integer',
    label: en('Context window (tokens)'),
    description: en('Upper bound of the context window; 0 disables budgeting. The model window caps it.'),
    default: DEFAULTS['context-window-tokens'],
  },
  {
    name: 'context-reserve-tokens',
    type: 'integer',
    label: en('Reserve (tokens)'),
    description: en('Tokens kept free for the answer (at most a quarter of the window).'),
    default: DEFAULTS['context-reserve-tokens'],
  },
  {
    name: 'context-keep-recent-tokens',
    type: 'integer',
    label: en('Recent history kept (tokens)'),
    description: en('Recent history kept verbatim when older history is summarized.'),
    default: DEFAULTS['context-keep-recent-tokens'],
  },
  {
    name: 'context-summary-tokens',
    type: 'integer',
    label: en('Summary size (tokens)'),
    description: en('Maximum size of the conversation summary.'),
    default: DEFAULTS['context-summary-tokens'],
  },
  {
    name: 'approval-tools',
    type: 'array',
    label: en('Tools needing approval'),
    description: en(
      "Tool names the agent runs only after a person approved the call (needs the agent's delivery policy enable_interactions).",
    ),
    default: [],
  },
  {
    name: 'approval-sources',
    type: 'array',
    label: en('Tool sources needing approval'),
    description: en('Tool source ids (e.g. an MCP server) all of whose tools need approval.'),
    default: [],
  },
  {
    name: 'approval-expires-in',
    type: 'integer',
    label: en('Approval expiry (seconds)'),
    description: en("How long an approval request stays answerable (at most 86400); empty: the host's 30 minutes."),
    required: false,
  },
];

/** The manifest the host registers for `builtin:local-agent/default`. */
export const LOCAL_AGENT_MANIFEST: RunnerManifest = runnerManifestSchema.parse({
  id: BUILTIN_LOCAL_AGENT_ID,
  name: 'local-agent',
  label: en('Local agent'),
  description: en(
    'The built-in LLM agent: prompt assembly, model fallback, streaming, tools, knowledge retrieval with rerank, ' +
      'context budgeting with compaction, skills, steering, tool approval, timeouts and cancel.',
  ),
  protocol_version: '1',
  capabilities: {
    streaming: true,
    tool_calling: true,
    knowledge_retrieval: true,
    multimodal_input: true,
    steering: true,
    interrupt: true,
    self_managed_context: true,
    interactions: true,
  },
  permissions: {
    models: ['invoke', 'stream', 'count_tokens', 'rerank'],
    tools: ['detail', 'call'],
    knowledge_bases: ['list', 'retrieve'],
    history: ['page'],
    interactions: ['request'],
  },
  config_schema: LOCAL_AGENT_CONFIG_SCHEMA,
  metadata: { builtin: true, reference: 'langbot LocalAgent 0.1.9 (LP)' },
});
