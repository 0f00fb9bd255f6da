import type { AgentRunContext, ChatMessage, LocalAgentHostPort, ToolDefinition } from '../host-port';
import { knowledgeBaseIds, modelCandidates, rerankConfig, staticPrompt, type AgentConfig } from '../config';
import { budgetFromContext, type ContextBudget } from '../context/budget';
import { compactFrame, type CompactionResult } from '../context/compactor';
import { checkedCounter, type TokenCounter } from '../context/fit';
import { coveredCursor, CHECKPOINT_SCHEMA, loadCheckpoint, loadHistory, saveCheckpoint } from '../context/history';
import { buildRagMessage, buildUserMessage, inputText, withDateGrounding } from '../context/messages';
import { retrieveChunks } from '../context/rag';
import { llmSummarizer, type Summarizer } from '../context/summary';
import type { SkillPackage } from '../skills/skill-loader';
import { resumedMessages, type ApprovalResume } from '../tools/approval';
import { buildSkillsMessage, skillEntries, skillTools } from '../skills/skill-tools';
import { buildToolDefinitions, type LocalTool } from '../tools/definitions';
import { RunStopped, type RunControls } from './controls';

/*
 * Assembly of one run (docs/local-agent.md#assembly): models, tools, budget, and the first context —
 * RAG, checkpoint, history, prompt (+ date line), skills index, summary, retrieved context,
 * current input — compacted once, with a new checkpoint when that compaction summarized history.
 */

export class NoAuthorizedModelError extends Error {
  constructor() {
    super('No authorized model for local-agent');
    this.name = 'NoAuthorizedModelError';
  }
}

export interface Assembly {
  modelIds: string[];
  tools: ToolDefinition[];
  localTools: Map<string, LocalTool>;
  hostTools: Set<string>;
  budget: ContextBudget;
  /** A fresh memoizing host counter (one per compaction). */
  counter: () => TokenCounter;
  summarize: Summarizer;
  messages: ChatMessage[];
  streaming: boolean;
  compaction: CompactionResult;
}

export interface AssemblyDeps {
  port: LocalAgentHostPort;
  controls: RunControls;
  context: AgentRunContext;
  config: AgentConfig;
  skills: readonly SkillPackage[];
  now: () => Date;
  warn: (m: string) => void;
  /** A tool approval this run resumes (docs/interactions.md#tool-approval-local-agent). */
  resume?: ApprovalResume | null;
}

/** Streaming iff runtime metadata allows it (default yes) and the delivery supports it (default no). */
export function streamingMode(context: AgentRunContext): boolean {
  const meta = context.runtime?.metadata;
  const runtimeAllows = !meta || typeof meta !== 'object' || Array.isArray(meta) || meta.streaming_supported !== false;
  return runtimeAllows && context.delivery?.supports_streaming === true;
}

/** Host token counting on the primary model; tools are never charged (funcs always empty). */
function counterFor(deps: AssemblyDeps, modelId: string): () => TokenCounter {
  return () =>
    checkedCounter((messages) => deps.controls.race(deps.port.countTokens({ model_id: modelId, messages, tools: [] })));
}

function summarizerFor(deps: AssemblyDeps, modelId: string, removeThink: boolean): Summarizer {
  return llmSummarizer(async (messages) => {
    const r = await deps.controls.race(
      deps.port.invokeModel({ model_id: modelId, messages, tools: [], remove_think: removeThink }),
    );
    const c = r?.message?.content;
    return typeof c === 'string' ? c : '';
  });
}

async function prompt(deps: AssemblyDeps): Promise<ChatMessage[]> {
  if (deps.context.context?.available_apis?.prompt_get) {
    try {
      // LP: an explicitly empty host prompt stays empty (the static prompt is only a fallback).
      return (await deps.controls.race(deps.port.promptGet())).map((m) => ({ ...m }));
    } catch (e) {
      if (e instanceof RunStopped) {
        throw e;
      }
      deps.warn('prompt.get failed; using the static prompt');
    }
  }
  return staticPrompt(deps.config);
}

export async function assemble(deps: AssemblyDeps): Promise<Assembly> {
  const { port, controls, context, config } = deps;
  const resources = context.resources ?? {};
  const modelIds = modelCandidates(config, new Set((resources.models ?? []).map((m) => m.model_id)));
  if (modelIds.length === 0) {
    throw new NoAuthorizedModelError();
  }
  const localTools = skillTools(deps.skills);
  const grants = resources.tools ?? [];
  const tools = await buildToolDefinitions(port, controls, grants, localTools, deps.warn);
  const budget = budgetFromContext(config, context.runtime?.metadata);
  const counter = counterFor(deps, modelIds[0]);
  const summarize = summarizerFor(deps, modelIds[0], config['remove-think']);

  const apis = context.context?.available_apis ?? {};
  const conversationId = context.context?.conversation_id ?? context.conversation?.conversation_id ?? null;
  const resume = deps.resume ?? null;
  // An approval's answer is not a question: nothing to retrieve for it.
  const query = resume?.submitted ? '' : inputText(context.input);
  const rerank = rerankConfig(config);
  const kbIds = knowledgeBaseIds(config, new Set((resources.knowledge_bases ?? []).map((k) => k.kb_id)));
  const chunks = await retrieveChunks(
    port,
    controls,
    query,
    { kbIds, topK: config['retrieval-top-k'], rerankModel: rerank.model, rerankTopK: rerank.topK },
    deps.warn,
  );

  const stateOn = apis.state === true;
  const checkpoint = stateOn ? await loadCheckpoint(port, controls, conversationId) : null;
  const history =
    apis.history_page && conversationId
      ? await loadHistory(
          {
            port,
            controls,
            conversationId,
            currentEventId: context.event?.event_id ?? null,
            limit: config['context-history-fetch-limit'],
          },
          checkpoint,
        )
      : { checkpoint: null, messages: [] };

  let promptMessages = await prompt(deps);
  if (config['date-grounding']) {
    promptMessages = withDateGrounding(promptMessages, deps.now());
  }
  const skillsMessage = buildSkillsMessage(skillEntries(resources.skills, deps.skills));
  const ragMessage = buildRagMessage(chunks);
  const user = resume?.submitted ? null : buildUserMessage(context.input);
  const current = resume ? resumedMessages(resume, user) : user ? [user] : [];

  const compaction = await compactFrame(
    {
      prompt: skillsMessage ? [...promptMessages, skillsMessage] : promptMessages,
      history: history.messages,
      rag: ragMessage ? [ragMessage] : [],
      current,
    },
    { budget, count: counter(), summarize },
  );
  if (stateOn && compaction.compacted && compaction.summary) {
    const covers = coveredCursor(compaction.omitted, history.checkpoint);
    if (covers) {
      await saveCheckpoint(port, controls, {
        schema_version: CHECKPOINT_SCHEMA,
        summary: compaction.summary,
        covers_until: covers,
        tokens_before: compaction.tokens_before,
        created_at: Math.floor(deps.now().getTime() / 1000),
        conversation_id: conversationId,
      });
    }
  }
  return {
    modelIds,
    tools,
    localTools,
    hostTools: new Set(grants.map((g) => g.tool_name)),
    budget,
    counter,
    summarize,
    messages: compaction.messages,
    streaming: streamingMode(context),
    compaction,
  };
}
