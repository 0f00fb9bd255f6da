import {
  Body,
  Controller,
  Delete,
  Get,
  HttpCode,
  Injectable,
  Param,
  Post,
  Query,
  UseInterceptors,
  type CallHandler,
  type ExecutionContext,
  type NestInterceptor,
} from '@nestjs/common';
import { ApiBearerAuth, ApiConsumes, ApiOperation, ApiQuery, ApiResponse, ApiTags } from '@nestjs/swagger';
import { InvalidatesCatalog } from '@libs/authz';
import type { Request } from 'express';
import type { Observable } from 'rxjs';
import { DomainError } from '@libs/protocol';
import { KnowledgeService } from '@libs/resources';
import { PageQueryDto } from '../dto/admin.dto';
import { ErrorResponseDto } from '../dto/error.dto';
import {
  CreateKnowledgeBaseDto,
  DocumentDto,
  DocumentPageDto,
  KnowledgeBaseDto,
  KnowledgeBasePageDto,
  KnowledgeSearchDto,
  KnowledgeSearchResultDto,
  UploadDocumentDto,
} from '../dto/knowledge.dto';

/** The document size limit (KnowledgeService checks it again on the decoded text). */
const MAX_DOCUMENT_BYTES = 5 * 1024 * 1024;
const TEXT_TYPES = ['text/plain', 'text/markdown'];

const tooLarge = () =>
  new DomainError('payload_too_large', `the document is larger than ${MAX_DOCUMENT_BYTES} bytes`, {
    limit: MAX_DOCUMENT_BYTES,
  });

/** A text/plain or text/markdown body, read up to the limit and decoded as UTF-8. */
async function readText(req: Request): Promise<string> {
  if (Number(req.headers['content-length'] ?? 0) > MAX_DOCUMENT_BYTES) {
    throw tooLarge();
  }
  const charset = /;\s*charset="?([^";]+)/i.exec(req.headers['content-type'] ?? '')?.[1];
  if (charset && !/^utf-?8$/i.test(charset)) {
    throw new DomainError('invalid_argument', `charset ${charset} is not supported; send UTF-8`);
  }
  const parts: Buffer[] = [];
  let total = 0;
  for await (const part of req as AsyncIterable<Buffer>) {
    total += part.length;
    if (total > MAX_DOCUMENT_BYTES) {
      throw tooLarge();
    }
    parts.push(part);
  }
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(Buffer.concat(parts));
  } catch {
    throw new DomainError('invalid_argument', 'the body is not valid UTF-8');
  }
}

/**
 * Turns a raw text/plain or text/markdown upload into the JSON upload body (`?name=` names it)
 * before validation runs; JSON bodies pass through.
 */
@Injectable()
class TextDocumentInterceptor implements NestInterceptor {
  async intercept(ctx: ExecutionContext, next: CallHandler): Promise<Observable<unknown>> {
    const req = ctx.switchToHttp().getRequest<Request>();
    const type = req.is(TEXT_TYPES);
    if (type) {
      req.body = { name: req.query.name, content_type: type, content: await readText(req) };
    }
    return next.handle();
  }
}

@ApiTags('admin')
@ApiBearerAuth()
@InvalidatesCatalog()
@Controller('v1/admin/knowledge-bases')
export class KnowledgeController {
  constructor(private readonly knowledge: KnowledgeService) {}

  @Post()
  @ApiOperation({ summary: 'Create a knowledge base (documents are chunked with its chunk_size and chunk_overlap)' })
  @ApiResponse({ status: 201, type: KnowledgeBaseDto })
  @ApiResponse({ status: 400, type: ErrorResponseDto })
  @ApiResponse({ status: 409, type: ErrorResponseDto })
  async create(@Body() body: CreateKnowledgeBaseDto): Promise<KnowledgeBaseDto> {
    const { kb_id, ...input } = body;
    return this.knowledge.create(kb_id, input);
  }

  @Get()
  @ApiResponse({ status: 200, type: KnowledgeBasePageDto })
  async list(@Query() q: PageQueryDto): Promise<KnowledgeBasePageDto> {
    return this.knowledge.page(q.cursor ?? null, q.limit ?? 50);
  }

  @Get(':kb_id')
  @ApiResponse({ status: 200, type: KnowledgeBaseDto })
  @ApiResponse({ status: 404, type: ErrorResponseDto })
  async get(@Param('kb_id') kbId: string): Promise<KnowledgeBaseDto> {
    return this.knowledge.get(kbId);
  }

  @Delete(':kb_id')
  @HttpCode(204)
  @ApiOperation({
    summary: 'Delete a knowledge base with its documents and chunks',
    description: "Refused (409) while an agent's resource_policy.allowed_kb_ids names it.",
  })
  @ApiResponse({ status: 204 })
  @ApiResponse({ status: 404, type: ErrorResponseDto })
  @ApiResponse({ status: 409, type: ErrorResponseDto })
  async remove(@Param('kb_id') kbId: string): Promise<void> {
    await this.knowledge.remove(kbId);
  }

  @Post(':kb_id/documents')
  @UseInterceptors(TextDocumentInterceptor)
  @ApiOperation({
    summary: 'Add a document: chunked and indexed in one transaction',
    description:
      'JSON {name, content_type, content, metadata}, or the raw text as a text/plain or text/markdown body with ?name=. At most 5 MiB of UTF-8 (JSON bodies are capped at 5 MB in total).',
  })
  @ApiConsumes('application/json', 'text/plain', 'text/markdown')
  @ApiQuery({ name: 'name', required: false, description: 'Document name, for text/plain or text/markdown bodies' })
  @ApiResponse({ status: 201, type: DocumentDto })
  @ApiResponse({ status: 400, type: ErrorResponseDto })
  @ApiResponse({ status: 404, type: ErrorResponseDto })
  @ApiResponse({ status: 413, type: ErrorResponseDto })
  async upload(@Param('kb_id') kbId: string, @Body() body: UploadDocumentDto): Promise<DocumentDto> {
    return this.knowledge.addDocument(kbId, body);
  }

  @Get(':kb_id/documents')
  @ApiResponse({ status: 200, type: DocumentPageDto })
  @ApiResponse({ status: 404, type: ErrorResponseDto })
  async documents(@Param('kb_id') kbId: string, @Query() q: PageQueryDto): Promise<DocumentPageDto> {
    return this.knowledge.documents(kbId, q.cursor ?? null, q.limit ?? 50);
  }

  @Get(':kb_id/documents/:document_id')
  @ApiResponse({ status: 200, type: DocumentDto })
  @ApiResponse({ status: 404, type: ErrorResponseDto })
  async document(@Param('kb_id') kbId: string, @Param('document_id') documentId: string): Promise<DocumentDto> {
    return this.knowledge.document(kbId, documentId);
  }

  @Delete(':kb_id/documents/:document_id')
  @HttpCode(204)
  @ApiOperation({ summary: 'Delete a document and its chunks' })
  @ApiResponse({ status: 204 })
  @ApiResponse({ status: 404, type: ErrorResponseDto })
  async removeDocument(@Param('kb_id') kbId: string, @Param('document_id') documentId: string): Promise<void> {
    await this.knowledge.removeDocument(kbId, documentId);
  }

  @Post(':kb_id/search')
  @HttpCode(200)
  @ApiOperation({ summary: 'Try a retrieval: the same search runners get from RetrieveKnowledge' })
  @ApiResponse({ status: 200, type: KnowledgeSearchResultDto })
  @ApiResponse({ status: 400, type: ErrorResponseDto })
  @ApiResponse({ status: 404, type: ErrorResponseDto })
  async search(@Param('kb_id') kbId: string, @Body() body: KnowledgeSearchDto): Promise<KnowledgeSearchResultDto> {
    return { results: await this.knowledge.search(kbId, body) };
  }
}
