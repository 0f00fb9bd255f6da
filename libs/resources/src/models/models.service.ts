import { Injectable } from '@nestjs/common';
import type { CatalogModel } from '@libs/authz';
import type {
  CountTokensRequest,
  CountTokensResponse,
  InvokeModelRequest,
  InvokeModelResponse,
  RerankRequest,
  RerankResponse,
  StreamModelChunk,
} from '@libs/proto';
import { DomainError } from '@libs/protocol';
import type { ResourceCall } from '../resource-call';

/** Model registry and the model operations runners call through the host API. */
@Injectable()
export class ModelsService {
  catalog(): Promise<CatalogModel[]> {
    return Promise.resolve([]);
  }

  invoke(_call: ResourceCall, _req: InvokeModelRequest): Promise<InvokeModelResponse> {
    return Promise.reject(new DomainError('unavailable', 'model invocation is not available yet'));
  }

  // eslint-disable-next-line require-yield
  async *stream(_call: ResourceCall, _req: InvokeModelRequest): AsyncIterable<StreamModelChunk> {
    await Promise.resolve();
    throw new DomainError('unavailable', 'model streaming is not available yet');
  }

  countTokens(_call: ResourceCall, _req: CountTokensRequest): Promise<CountTokensResponse> {
    return Promise.reject(new DomainError('unavailable', 'token counting is not available yet'));
  }

  rerank(_call: ResourceCall, _req: RerankRequest): Promise<RerankResponse> {
    return Promise.reject(new DomainError('unavailable', 'rerank is not available yet'));
  }
}
