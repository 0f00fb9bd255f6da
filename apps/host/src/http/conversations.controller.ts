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
    const page = await this.transcript.page(conversationId, q.thread_id, {
      before_cursor: q.before,
      after_cursor: q.after,
      direction: forward ? 'forward' : 'backward',
      limit: q.limit,
      include_attachments: true,
    });
    return page as unknown as TranscriptPageDto;
  }
}
