import { Body, Controller, Get, HttpCode, Param, Post, Query, Req } from '@nestjs/common';
import { ApiBearerAuth, ApiBody, ApiOperation, ApiResponse, ApiTags } from '@nestjs/swagger';
import { Roles, type AuthenticatedRequest } from '@libs/auth';
import { WriteTenancy } from './tenancy';
import { InteractionsService, type InteractionInput } from '@libs/runs';
import { ErrorResponseDto } from './dto/error.dto';
import { InteractionListDto, InteractionsQueryDto, SubmitInteractionResultDto } from './dto/interactions.dto';
import { BodyPipe } from './compiled-body';
import { bodyRef, submitInteractionBody } from './dto/event.schema';

@ApiTags('interactions')
@ApiBearerAuth()
@Controller('v1')
export class InteractionsController {
  constructor(
    private readonly interactions: InteractionsService,
    private readonly tenancy: WriteTenancy,
  ) {}

  @Post('interactions/:id/submit')
  @Roles('platform', 'admin')
  @HttpCode(202)
  @ApiOperation({
    summary: 'Submit the answer to a structured interaction with its one-time token',
    description:
      'The token and id come from the `interaction.request` delivery op. Values are checked against the request (types, required, options). Exactly one valid submission is accepted; it becomes an `interaction.submitted` event of the conversation (steered into its active run when there is one). A used or expired token gets 409 and changes nothing; a token that does not match, 403.',
  })
  @ApiBody(bodyRef('SubmitInteractionDto'))
  @ApiResponse({ status: 202, type: SubmitInteractionResultDto })
  @ApiResponse({ status: 400, type: ErrorResponseDto, description: 'A value breaks its field (details.field)' })
  @ApiResponse({ status: 403, type: ErrorResponseDto, description: 'callback_token does not match' })
  @ApiResponse({
    status: 404,
    type: ErrorResponseDto,
    description: "No such interaction, or another workspace's (docs/tenancy.md#isolation)",
  })
  @ApiResponse({
    status: 409,
    type: ErrorResponseDto,
    description: 'Already submitted, expired or superseded (details.status)',
  })
  submit(
    @Param('id') id: string,
    @Body(new BodyPipe(submitInteractionBody)) body: InteractionInput,
    @Req() req: AuthenticatedRequest,
  ): Promise<SubmitInteractionResultDto> {
    return this.interactions.submit(id, body, null, (runId) => this.tenancy.seesRun(req, runId));
  }

  @Get('admin/interactions')
  @ApiTags('admin')
  @ApiOperation({ summary: 'Interactions by status (default pending), newest first, with their age and run' })
  @ApiResponse({ status: 200, type: InteractionListDto })
  @ApiResponse({ status: 400, type: ErrorResponseDto })
  async list(@Query() q: InteractionsQueryDto, @Req() req: AuthenticatedRequest): Promise<InteractionListDto> {
    const items = await this.interactions.list([q.status ?? 'pending'], q.limit ?? 50);
    return { items: await this.tenancy.ofVisibleRuns(req, items) };
  }
}
