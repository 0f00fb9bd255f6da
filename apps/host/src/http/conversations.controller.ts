import { Controller, Get, Param, Query, Req } from '@nestjs/common';
import { ApiBearerAuth, ApiOperation, ApiResponse, ApiTags } from '@nestjs/swagger';
import { Roles, type AuthenticatedRequest } from '@libs/auth';
import { WriteTenancy } from './tenancy';
import { TranscriptService, type HistoryPage } from '@libs/conversations';
import { TranscriptPageDto, TranscriptQueryDto } from './dto/inspection.dto';

@ApiTags('conversations')
@ApiBearerAuth()
@Roles('platform', 'admin')
@Controller('v1/conversations')
export class ConversationsController {
  constructor(
    private readonly transcript: TranscriptService,
    private readonly tenancy: WriteTenancy,
  ) {}

  @Get(':conversation_id/transcript')
  @ApiOperation({ summary: "A page of the conversation's transcript (user and assistant messages)" })
  @ApiResponse({ status: 200, type: TranscriptPageDto })
  async transcriptPage(
    @Param('conversation_id') conversationId: string,
    @Query() q: TranscriptQueryDto,
    @Req() req: AuthenticatedRequest,
  ): Promise<HistoryPage> {
    const forward = q.order === 'oldest' || (q.after !== undefined && q.order === undefined);
    // The service's page as it is: TranscriptPageDto documents it (OpenAPI); its stored
    // attachment_refs and metadata are the JSON admission wrote, described by TranscriptItemDto.
    // Admin view: every agent's and workspace's rows of this conversation id unless narrowed.
    const filter = {
      conversation_id: conversationId,
      agent_id: q.agent_id,
      // docs/tenancy.md#isolation: a workspace key reads its workspace's rows only.
      workspace_id: this.tenancy.read(req, q.workspace_id),
      thread_id: q.thread_id,
    };
    const page = await this.transcript.browse(filter, {
      before_cursor: q.before,
      after_cursor: q.after,
      direction: forward ? 'forward' : 'backward',
      limit: q.limit,
      include_attachments: true,
    });
    return page;
  }
}
