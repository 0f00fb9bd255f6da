import { ApiProperty } from '@nestjs/swagger';
import { ERROR_CODES } from '@libs/protocol';

export class ProtocolErrorDto {
  @ApiProperty({ enum: ERROR_CODES }) code!: string;
  @ApiProperty() message!: string;
  @ApiProperty() retryable!: boolean;
  @ApiProperty({ type: 'object', additionalProperties: true }) details!: Record<string, unknown>;
}

export class ErrorResponseDto {
  @ApiProperty({ type: ProtocolErrorDto }) error!: ProtocolErrorDto;
}
