import { Controller, Get, Param, Query } from '@nestjs/common';
import { ApiBearerAuth, ApiOperation, ApiResponse, ApiTags } from '@nestjs/swagger';
import { Roles } from '@libs/auth';
import { TranscriptService } from '@libs/conversations';
import { TranscriptPageDto, TranscriptQueryDto } from './dto/inspection.dto';

@ApiTags('conversations')
@ApiBearerAuth()
@Roles('platform', 'admin')
@Controller('v1/conversations')
export class ConversationsController {
  constructor(private readonly transcript: TranscriptService) {}

  @Get(':conversation_id/transcript')
  @ApiOperation({ summary: "A page of the conversation's transcript (user and assistant messages)" })
  @ApiResponse({ status: 200, type: TranscriptPageDto })
  async transcriptPage(
    @Param('conversation_id') conversationId: string,
    @Query() q: TranscriptQueryDto,
  ): Promise<TranscriptPageDto> {
    const forward = q.order === 'oldest' || (q.after !== undefined && q.order === undefined);
    // Stored attachment_refs and metadata are the shapes admission wrote (see TranscriptItemDto).
    // Admin view: every agent's and workspace's rows of this conversation id unless narrowed.
    const filter = {
      conversation_id: conversationId,
      agent_id: q.agent_id,
      workspace_id: q.workspace_id,
      thread_id: q.thread_id,
    };
    const page = await this.transcript.browse(filter, {
      before_cursor: q.before,
      after_cursor: q.after,
      direction: forward ? 'forward' : 'backward',
      limit: q.limit,
      include_attachments: true,
    });
    return page as unknown as TranscriptPageDto;
  }
}
