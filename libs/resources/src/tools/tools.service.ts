import { Inject, Injectable } from '@nestjs/common';
import { Subject, type Observable } from 'rxjs';
import { AjvJsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/ajv-provider.js';
import type { JsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/types.js';
import type { CatalogTool, GrantedTool } from '@libs/authz';
import { APP_CONFIG, type AppConfig } from '@libs/config';
import { DomainError } from '@libs/protocol';
import { telemetry } from '@libs/telemetry';
import type { ResourceCall } from '../resource-call';
import { callHttpTool } from './http-tools';
import type { McpRunScope } from './mcp-client-pool';
import { callMcpTool } from './mcp-call';
import { McpClientPool } from './mcp-client-pool';
import { boundResult } from './result-bound';
import { catalogMetadata } from './tool-metadata';
import { progressReporter, type ToolProgress, type ToolProgressEvent } from './tool-progress';
import { isPlainObject, plainResult, type ToolResult } from './tool-result';
import { ToolRegistryService, type ToolTarget } from './tool-registry.service';

/** Why a call's signal fired. */
type AbortReason = 'timeout' | 'run_ended' | 'deadline';

/**
 * Tool execution for runners. Outcomes of `call_tool`:
 * - the tool ran → `{is_error: false, content, structured_content?}`;
 * - the tool ran and reported a failure (MCP `isError` result or JSON-RPC error from the server,
 *   HTTP tool non-2xx, failed fetch) → the same shape with `is_error: true`: hand it to the model;
 * - the host could not run it → a protocol error: `invalid_argument` (parameters not an object,
 *   or not matching the schema of an HTTP or built-in tool), `not_found` (removed, switched off,
 *   or its name now belongs to another source), `unavailable` (server unreachable, connection
 *   lost; retryable), `deadline_exceeded` (tool timeout, run deadline, run ended).
 * A result over TOOL_RESULT_MAX_BYTES is cut to fit, with a marker (`boundResult`), never refused.
 */
@Injectable()
export class ToolsService {
  private readonly ajv = new AjvJsonSchemaValidator();
  private readonly validators = new Map<string, JsonSchemaValidator<unknown>>();
  private readonly progress = new Subject<ToolProgressEvent>();
  /** Progress reports of tool calls in flight, for the run's live result stream. */
  readonly progress$: Observable<ToolProgressEvent> = this.progress.asObservable();

  constructor(
    private readonly registry: ToolRegistryService,
    private readonly pool: McpClientPool,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  catalog(): Promise<CatalogTool[]> {
    return this.registry.catalog();
  }

  /** `{name, description, parameters}` of a granted tool, from its frozen source, with its MCP metadata. */
  async detail(_call: ResourceCall, tool: GrantedTool): Promise<Record<string, unknown>> {
    const target = await this.registry.resolve(tool);
    if (target.kind === 'builtin') {
      const { description, parameters } = target.tool;
      return { name: tool.tool_name, description, parameters };
    }
    const { description, parameters, metadata } = target.row;
    return { name: tool.tool_name, description, parameters, ...catalogMetadata(metadata) };
  }

  /**
   * Executes exactly the frozen `{source, source_id}` implementation of a granted tool. The
   * timeout restarts on each progress report of the tool (never past the run deadline), and each
   * report goes out on `progress$`.
   */
  async call(
    call: ResourceCall,
    tool: GrantedTool,
    parameters: Record<string, unknown>,
  ): Promise<Record<string, unknown>> {
    if (!isPlainObject(parameters)) {
      throw new DomainError('invalid_argument', 'parameters: must be an object', { field: 'parameters' });
    }
    const target = await this.registry.resolve(tool);
    if (target.kind !== 'mcp') {
      this.validate(target.kind === 'builtin' ? target.tool.parameters : target.http.parameters, parameters);
    }
    const timeoutMs =
      (target.kind === 'builtin' ? undefined : target.spec.config.timeout_ms) ?? this.config.tools.callTimeoutMs;
    const remaining = () => (call.deadline_at_ms === null ? Infinity : call.deadline_at_ms - Date.now());
    if (remaining() <= 0 || call.signal.aborted) {
      throw new DomainError('deadline_exceeded', `the run ended before tool ${tool.tool_name} could run`);
    }
    const ctl = new AbortController();
    let reason: AbortReason | null = null;
    let ms = 0;
    const stop = (why: AbortReason) => {
      reason ??= why;
      ctl.abort(new DomainError('deadline_exceeded', this.abortMessage(why, tool.tool_name, ms)));
    };
    let timer: NodeJS.Timeout | undefined;
    // (Re)arms the call's timer: the tool timeout, cut short by the run deadline.
    const arm = () => {
      clearTimeout(timer);
      ms = Math.max(0, Math.min(timeoutMs, remaining()));
      const why = ms < timeoutMs ? 'deadline' : 'timeout';
      timer = setTimeout(() => stop(why), ms);
    };
    arm();
    const report = progressReporter(call.run_id, tool.tool_name, (e) => this.progress.next(e));
    const onProgress = (p: ToolProgress) => {
      if (reason === null) {
        arm();
        report(p);
      }
    };
    const onRunEnd = () => stop('run_ended');
    call.signal.addEventListener('abort', onRunEnd, { once: true });
    const aborted = new Promise<never>((_, reject) =>
      ctl.signal.addEventListener('abort', () => reject(ctl.signal.reason as Error), { once: true }),
    );
    aborted.catch(() => undefined);
    const t0 = telemetry.now();
    try {
      const elicit = call.interactions ? { runId: call.run_id, runSignal: call.signal } : null;
      const result = await Promise.race([
        this.execute(target, parameters, ctl.signal, timeoutMs, onProgress, elicit),
        aborted,
      ]);
      telemetry.toolCall(target.kind, 'ok', t0, tool.tool_name, call.run_id);
      return plainResult(boundResult(result, this.config.tools.maxResultBytes));
    } catch (e) {
      telemetry.toolCall(target.kind, 'error', t0, tool.tool_name, call.run_id);
      if (reason) {
        throw new DomainError('deadline_exceeded', this.abortMessage(reason, tool.tool_name, ms), {
          tool_name: tool.tool_name,
          reason,
          timeout_ms: ms,
        });
      }
      if (e instanceof DomainError) {
        throw e;
      }
      throw new DomainError('runtime_error', `tool ${tool.tool_name} failed: ${(e as Error).message}`, {
        tool_name: tool.tool_name,
      });
    } finally {
      clearTimeout(timer);
      call.signal.removeEventListener('abort', onRunEnd);
    }
  }

  private execute(
    target: ToolTarget,
    args: Record<string, unknown>,
    signal: AbortSignal,
    timeoutMs: number,
    onProgress: (p: ToolProgress) => void,
    elicit: McpRunScope | null = null,
  ): Promise<ToolResult> {
    const max = this.config.tools.maxResultBytes;
    switch (target.kind) {
      case 'builtin':
        return target.tool.run(args, { signal, maxResultBytes: max });
      case 'http':
        return callHttpTool(target.sourceId, target.spec.config, target.http, args, signal, max, this.config.secret);
      case 'mcp':
        return callMcpTool(this.pool, target, args, { signal, timeoutMs, onProgress, elicit });
    }
  }

  private abortMessage(why: AbortReason, toolName: string, ms: number): string {
    switch (why) {
      case 'timeout':
        return `tool ${toolName} did not finish within ${ms} ms`;
      case 'deadline':
        return `the run deadline passed while tool ${toolName} was running`;
      case 'run_ended':
        return `the run ended while tool ${toolName} was running`;
    }
  }

  /** The host checks the parameters of the tools it runs itself (MCP servers check their own). */
  private validate(schema: Record<string, unknown>, parameters: Record<string, unknown>): void {
    const key = JSON.stringify(schema);
    let validator = this.validators.get(key);
    if (!validator) {
      validator = this.ajv.getValidator<unknown>(schema);
      this.validators.set(key, validator);
    }
    const r = validator(parameters);
    if (!r.valid) {
      throw new DomainError('invalid_argument', `parameters: ${r.errorMessage}`, { field: 'parameters' });
    }
  }
}
