/*
 * The model operations' inputs and outputs in domain terms (JSON values), whichever adapter the
 * call came through: the gRPC host API converts its messages to these, the in-process adapter
 * builds them directly. Messages and tools are Protocol v1 JSON objects, validated by the mapping.
 */
type Json = Record<string, unknown>;

export interface ModelCallInput {
  model_id: string;
  messages: Json[];
  tools: Json[];
  extra_args?: Json;
  remove_think?: boolean;
  timeout_ms?: number;
}

export interface ModelCallOutput {
  message: Json;
  usage?: Json;
}

/** One item of a model stream: a MessageChunk, or the trailing usage. */
export interface ModelStreamItem {
  chunk?: Json;
  usage?: Json;
}

export interface CountTokensInput {
  model_id: string;
  messages: Json[];
  tools: Json[];
}

export interface RerankCallInput {
  model_id: string;
  query: string;
  documents: string[];
  top_k?: number;
  extra_args?: Json;
}

export interface RerankCallOutput {
  results: { index: number; relevance_score: number }[];
}
