import { Inject, Injectable, Logger } from '@nestjs/common';
import type { ChatCompletionCreateParamsBase } from 'openai/resources/chat/completions';
import type { CatalogModel } from '@libs/authz';
import { APP_CONFIG, type AppConfig } from '@libs/config';
import { isFenced, ModelsRepository, type ModelEntity } from '@libs/persistence';
import { DomainError } from '@libs/protocol';
import { telemetry } from '@libs/telemetry';
import type { ResourceCall } from '../resource-call';
import { CallScope } from './call-scope';
import { fromChatMessage, toChatMessages, toChatTools, type JsonObject } from './message-mapping';
import { ModelClients } from './model-clients';
import { ModelRegistry } from './model-registry.service';
import { storedAbilities, usageJson } from './model-types';
import type {
  CountTokensInput,
  ModelCallInput,
  ModelCallOutput,
  ModelStreamItem,
  RerankCallInput,
  RerankCallOutput,
} from './model-requests';
import { mergeExtraArgs } from './model-validation';
import { malformed, providerError, type ProviderContext } from './provider-errors';
import { checkRerank, parseRerank } from './rerank';
import { StreamAssembler } from './stream-assembly';
import { TokenCounter } from './tokenizer';

/** Per-call timeouts when the runner sets none (the reference SDK's defaults); the run deadline bounds them. */
const DEFAULT_TIMEOUT_MS = { invoke: 120_000, stream: 120_000, rerank: 30_000 };
const MAX_TIMEOUT_MS = 30 * 60_000;

type ChatBody = Omit<ChatCompletionCreateParamsBase, 'stream'>;
type Operation = 'invoke' | 'stream' | 'rerank';

const invalid = (field: string, rule: string) => new DomainError('invalid_argument', `${field}: ${rule}`, { field });

function timeoutOf(ms: number | null | undefined, fallback: number): number {
  if (ms === undefined || ms === null) {
    return fallback;
  }
  if (!Number.isInteger(ms) || ms < 1 || ms > MAX_TIMEOUT_MS) {
    throw invalid('timeout_ms', `must be an integer from 1 to ${MAX_TIMEOUT_MS}`);
  }
  return ms;
}

const count = (v: unknown): number | null => (typeof v === 'number' && Number.isInteger(v) && v >= 0 ? v : null);

/**
 * The model operations runners call through the host API, proxied to the registered provider
 * with the official `openai` SDK: invoke, stream, count_tokens (local, js-tiktoken) and rerank.
 * Every proxied call is metered (one `model_usage` row, `complete` false when the provider
 * reported no usage); every failure leaves as a protocol error without the API key in it.
 */
@Injectable()
export class ModelsService {
  private readonly logger = new Logger('Models');
  private readonly clients: ModelClients;

  constructor(
    private readonly registry: ModelRegistry,
    private readonly repo: ModelsRepository,
    @Inject(APP_CONFIG) config: AppConfig,
  ) {
    this.clients = new ModelClients(config);
  }

  catalog(): Promise<CatalogModel[]> {
    return this.registry.catalog();
  }

  async invoke(call: ResourceCall, req: ModelCallInput): Promise<ModelCallOutput> {
    const model = await this.registry.require(req.model_id, 'chat');
    const { message, usage } = await this.complete(call, model, req, 'invoke');
    return { message, ...(usage ? { usage } : {}) };
  }

  async *stream(call: ResourceCall, req: ModelCallInput): AsyncIterable<ModelStreamItem> {
    const model = await this.registry.require(req.model_id, 'chat');
    if (!storedAbilities(model.abilities).streaming) {
      yield* this.emulatedStream(call, model, req);
      return;
    }
    const body = this.chatBody(model, req);
    const scope = new CallScope(call, timeoutOf(req.timeout_ms, DEFAULT_TIMEOUT_MS.stream), true);
    const ctx: ProviderContext = { model_id: model.model_id, secret: null };
    const assembler = new StreamAssembler(!!req.remove_think);
    let sent = false;
    try {
      scope.check();
      const { client, secret } = this.clients.for(model);
      ctx.secret = secret;
      sent = true;
      const stream = await client.chat.completions.create(
        { ...body, stream: true, stream_options: { include_usage: true } },
        { signal: scope.signal },
      );
      for await (const chunk of stream) {
        scope.touch();
        ctx.streaming = true;
        const out = assembler.push(chunk);
        if (out) {
          yield { chunk: out };
        }
      }
      scope.check(); // the SDK ends an aborted stream without an error
      if (!assembler.finished) {
        throw malformed(model.model_id, 'the stream ended without a finish_reason');
      }
      yield { chunk: assembler.final() };
      yield { usage: assembler.usage ?? {} };
    } catch (e) {
      scope.failed = true;
      throw providerError(e, scope, ctx);
    } finally {
      scope.dispose();
      if (sent) {
        await this.meter(call, model.model_id, 'stream', assembler.usage, scope);
      }
    }
  }

  /**
   * Input tokens of the request invoke would send (same mapping; tools dropped for a model
   * without tool calling). A model without a tokenizer fails closed: `unavailable`, not
   * retryable, details {reason: 'no_tokenizer'}: the host never guesses without one (a count that
   * runs past its time budget answers the upper estimate of tokenizer.ts, never less).
   */
  async countTokens(_call: ResourceCall, req: CountTokensInput): Promise<{ tokens: number }> {
    const model = await this.registry.require(req.model_id, 'chat');
    if (!model.tokenizer) {
      throw new DomainError(
        'unavailable',
        `model ${model.model_id} has no tokenizer: count_tokens is not available for it`,
        { reason: 'no_tokenizer' },
        false,
      );
    }
    const abilities = storedAbilities(model.abilities);
    const messages = toChatMessages(req.messages, abilities);
    const tools = toChatTools(req.tools);
    const counter = new TokenCounter(model.tokenizer as ConstructorParameters<typeof TokenCounter>[0]);
    // Counted in slices between turns of the event loop, bounded per piece and in time
    // (tokenizer.ts); past the budget the answer is the documented upper estimate.
    const { tokens } = await counter.requestAsync(messages, abilities.tool_calling ? tools : []);
    return { tokens };
  }

  async rerank(call: ResourceCall, req: RerankCallInput): Promise<RerankCallOutput> {
    const model = await this.registry.require(req.model_id, 'rerank');
    const input = checkRerank(req.query, req.documents, req.top_k);
    if (input.documents.length === 0) {
      return { results: [] };
    }
    const extra = mergeExtraArgs(model.extra_args, req.extra_args, 'rerank');
    const scope = new CallScope(call, DEFAULT_TIMEOUT_MS.rerank);
    const ctx: ProviderContext = { model_id: model.model_id, secret: null };
    let usage: JsonObject | null = null;
    let sent = false;
    try {
      scope.check();
      const { client, secret } = this.clients.for(model);
      ctx.secret = secret;
      sent = true;
      const raw = await client.post<unknown>('/rerank', {
        body: {
          ...extra,
          model: model.model_name,
          query: input.query,
          documents: input.documents,
          top_n: Math.min(input.topK ?? input.documents.length, input.documents.length),
        },
        signal: scope.signal,
      });
      const parsed = parseRerank(model.model_id, raw, input);
      usage = parsed.usage;
      return { results: parsed.results };
    } catch (e) {
      scope.failed = true;
      throw providerError(e, scope, ctx);
    } finally {
      scope.dispose();
      if (sent) {
        await this.meter(call, model.model_id, 'rerank', usage, scope);
      }
    }
  }

  /** One non-streaming chat completion, metered as `operation`. */
  private async complete(
    call: ResourceCall,
    model: ModelEntity,
    req: ModelCallInput,
    operation: Operation,
  ): Promise<{ message: JsonObject; usage: JsonObject | null }> {
    const body = this.chatBody(model, req);
    const scope = new CallScope(call, timeoutOf(req.timeout_ms, DEFAULT_TIMEOUT_MS[operation]));
    const ctx: ProviderContext = { model_id: model.model_id, secret: null };
    let usage: JsonObject | null = null;
    let sent = false;
    try {
      scope.check();
      const { client, secret } = this.clients.for(model);
      ctx.secret = secret;
      sent = true;
      const completion = await client.chat.completions.create({ ...body, stream: false }, { signal: scope.signal });
      usage = usageJson(completion.usage);
      const choice = completion.choices?.[0];
      if (!choice?.message) {
        throw malformed(model.model_id, 'the completion has no choices');
      }
      return { message: fromChatMessage(choice.message, choice.finish_reason ?? null, !!req.remove_think), usage };
    } catch (e) {
      scope.failed = true;
      throw providerError(e, scope, ctx);
    } finally {
      scope.dispose();
      if (sent) {
        await this.meter(call, model.model_id, operation, usage, scope);
      }
    }
  }

  /** A model without the streaming ability: one completion, sent as a text chunk, the final chunk and usage. */
  private async *emulatedStream(
    call: ResourceCall,
    model: ModelEntity,
    req: ModelCallInput,
  ): AsyncIterable<ModelStreamItem> {
    const { message, usage } = await this.complete(call, model, req, 'stream');
    const text = typeof message.content === 'string' ? message.content : '';
    let seq = 0;
    if (text !== '') {
      yield { chunk: { role: 'assistant', content: text, is_final: false, msg_sequence: ++seq } };
    }
    const { content: _content, role: _role, ...rest } = message;
    yield {
      chunk: { role: 'assistant', content: '', all_content: text, ...rest, is_final: true, msg_sequence: ++seq },
    };
    yield { usage: usage ?? {} };
  }

  /** The chat-completions request body of a call: mapped messages and tools over the model's extra_args. */
  private chatBody(model: ModelEntity, req: ModelCallInput): ChatBody {
    const abilities = storedAbilities(model.abilities);
    const messages = toChatMessages(req.messages, abilities);
    if (messages.length === 0) {
      throw invalid('messages', 'must not be empty');
    }
    // Validated either way; dropped (as the reference host does) for a model without tool calling.
    const tools = toChatTools(req.tools);
    const extra = mergeExtraArgs(model.extra_args, req.extra_args, 'chat');
    for (const key of ['max_tokens', 'max_completion_tokens']) {
      const v = extra[key];
      if (v !== undefined && model.max_output_tokens !== null && typeof v === 'number' && v > model.max_output_tokens) {
        throw invalid(
          `extra_args.${key}`,
          `must not exceed the model's max_output_tokens (${model.max_output_tokens})`,
        );
      }
    }
    return {
      ...extra,
      model: model.model_name,
      messages,
      ...(abilities.tool_calling && tools.length > 0 ? { tools } : {}),
    };
  }

  private async meter(
    call: ResourceCall,
    modelId: string,
    operation: Operation,
    usage: JsonObject | null,
    scope: CallScope,
  ): Promise<void> {
    const prompt = count(usage?.prompt_tokens);
    const completion = count(usage?.completion_tokens);
    telemetry.modelCall(
      modelId,
      operation,
      scope.failed ? 'error' : 'ok',
      scope.startedMs,
      prompt,
      completion,
      call.run_id,
    );
    const total = count(usage?.total_tokens) ?? (prompt !== null && completion !== null ? prompt + completion : null);
    try {
      await this.repo.recordUsage(
        {
          run_id: call.run_id,
          model_id: modelId,
          operation,
          prompt_tokens: prompt,
          completion_tokens: completion,
          total_tokens: total,
          complete: total !== null,
          created_at: Date.now(),
        },
        call.lease ?? null,
      );
    } catch (e) {
      if (isFenced(e)) {
        // The run is no longer running under this call's lease: no usage row, and the call fails
        // (docs/scale-out.md#fenced-host-api-writes).
        throw e;
      }
      this.logger.error({ run_id: call.run_id, msg: `model_usage write failed: ${String(e)}` });
    }
  }
}
