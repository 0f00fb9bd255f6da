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
  Req,
} from '@nestjs/common';
import { ApiBearerAuth, ApiConsumes, ApiOperation, ApiQuery, ApiResponse, ApiTags } from '@nestjs/swagger';
import { InvalidatesCatalog } from '@libs/authz';
import { RouteConfig } from '@nestjs/platform-fastify';
import type { FastifyRequest } from 'fastify';
import type { Observable } from 'rxjs';
import { DomainError } from '@libs/protocol';
import { KnowledgeService } from '@libs/resources';
import { PageQueryDto } from '../dto/admin.dto';
import { TEXT_BODY, TEXT_TYPES } from '../text-body';
import type { AuthenticatedRequest } from '@libs/auth';
import { ErrorResponseDto } from '../dto/error.dto';
import { WriteTenancy } from '../tenancy';
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

/** The document size limit (the HTTP body limit is the same 5 MiB; KnowledgeService checks the decoded text). */
const MAX_DOCUMENT_BYTES = 5 * 1024 * 1024;

/** A raw text/plain or text/markdown body (a Buffer from the edge's text parser), decoded as UTF-8. */
function decodeText(body: Buffer): string {
  if (body.length > MAX_DOCUMENT_BYTES) {
    throw new DomainError('payload_too_large', `the document is larger than ${MAX_DOCUMENT_BYTES} bytes`, {
      limit: MAX_DOCUMENT_BYTES,
    });
  }
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(body);
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
  intercept(ctx: ExecutionContext, next: CallHandler): Observable<unknown> {
    const req = ctx.switchToHttp().getRequest<FastifyRequest<{ Querystring: { name?: unknown } }>>();
    if (Buffer.isBuffer(req.body)) {
      const type = (req.headers['content-type'] ?? '').split(';')[0].trim().toLowerCase();
      req.body = {
        name: req.query.name,
        content_type: TEXT_TYPES.includes(type) ? type : 'text/plain',
        content: decodeText(req.body),
      };
    }
    return next.handle();
  }
}

@ApiTags('admin')
@ApiBearerAuth()
@InvalidatesCatalog()
@Controller('v1/admin/knowledge-bases')
export class KnowledgeController {
  constructor(
    private readonly knowledge: KnowledgeService,
    private readonly tenancy: WriteTenancy,
  ) {}

  @Post()
  @ApiOperation({ summary: 'Create a knowledge base (documents are chunked with its chunk_size and chunk_overlap)' })
  @ApiResponse({ status: 201, type: KnowledgeBaseDto })
  @ApiResponse({ status: 400, type: ErrorResponseDto })
  @ApiResponse({ status: 409, type: ErrorResponseDto })
  async create(@Body() body: CreateKnowledgeBaseDto, @Req() req: AuthenticatedRequest): Promise<KnowledgeBaseDto> {
    const { kb_id, workspace_id, shared, ...input } = body;
    return this.knowledge.create(kb_id, input, {
      workspace_id: this.tenancy.target(req, workspace_id),
      shared: this.tenancy.shared(req, shared),
    });
  }

  @Get()
  @ApiOperation({ summary: 'List knowledge bases, cursor-paged' })
  @ApiResponse({ status: 200, type: KnowledgeBasePageDto })
  async list(@Query() q: PageQueryDto, @Req() req: AuthenticatedRequest): Promise<KnowledgeBasePageDto> {
    return this.knowledge.page(q.cursor ?? null, q.limit ?? 50, this.tenancy.scope(req));
  }

  @Get(':kb_id')
  @ApiOperation({ summary: 'A knowledge base with its document and chunk counts' })
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
  @RouteConfig({ [TEXT_BODY]: true })
  @UseInterceptors(TextDocumentInterceptor)
  @ApiOperation({
    summary: 'Add a document: chunked and indexed in batches, listed and searched once complete',
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
  @ApiOperation({ summary: "List a knowledge base's documents, cursor-paged" })
  @ApiResponse({ status: 200, type: DocumentPageDto })
  @ApiResponse({ status: 404, type: ErrorResponseDto })
  async documents(@Param('kb_id') kbId: string, @Query() q: PageQueryDto): Promise<DocumentPageDto> {
    return this.knowledge.documents(kbId, q.cursor ?? null, q.limit ?? 50);
  }

  @Get(':kb_id/documents/:document_id')
  @ApiOperation({ summary: 'A document of a knowledge base' })
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
