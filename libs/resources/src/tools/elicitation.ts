import { Injectable } from '@nestjs/common';
import type { ElicitRequest, ElicitResult } from '@modelcontextprotocol/sdk/types.js';

/** What an MCP server asks the user (`elicitation/create` params). */
export type ElicitationParams = ElicitRequest['params'];
export type { ElicitResult };

/**
 * Who turns an MCP server's `elicitation/create` into a structured interaction of the run that
 * made the tool call (docs/interactions.md#mcp-elicitation). `signal` aborts when the tool call
 * that asked has ended (its timeout, the run's end) or the server withdrew the request.
 */
export interface ElicitationRequester {
  request(runId: string, params: ElicitationParams, signal: AbortSignal): Promise<ElicitResult>;
}

/**
 * The seam between the MCP client (here) and the interactions (libs/runs), which registers
 * itself at boot. Without a requester no connection offers the capability.
 */
@Injectable()
export class ElicitationBroker {
  requester: ElicitationRequester | null = null;
}
