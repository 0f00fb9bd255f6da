import { Injectable } from '@nestjs/common';
import type { CatalogTool, GrantedTool } from '@libs/authz';
import { DomainError } from '@libs/protocol';
import type { ResourceCall } from '../resource-call';

/** Tool registry (MCP servers, HTTP tools, built-ins) and tool execution for runners. */
@Injectable()
export class ToolsService {
  catalog(): Promise<CatalogTool[]> {
    return Promise.resolve([]);
  }

  /** `{name, description, parameters}` of a granted tool, from its frozen source. */
  detail(_call: ResourceCall, _tool: GrantedTool): Promise<Record<string, unknown>> {
    return Promise.reject(new DomainError('unavailable', 'tool detail is not available yet'));
  }

  /** Executes exactly the frozen `{source, source_id}` implementation of a granted tool. */
  call(
    _call: ResourceCall,
    _tool: GrantedTool,
    _parameters: Record<string, unknown>,
  ): Promise<Record<string, unknown>> {
    return Promise.reject(new DomainError('unavailable', 'tool calls are not available yet'));
  }
}
