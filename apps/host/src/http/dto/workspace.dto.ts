import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { IsNotEmpty, IsObject, IsOptional, IsString, MaxLength } from 'class-validator';
import { NullIsAbsent } from './rules';

export class WorkspaceQuotasDto {
  @ApiPropertyOptional({ type: Number, nullable: true, description: 'Runs admitted per second, sustained' })
  runs_per_second?: number | null;
  @ApiPropertyOptional({
    type: Number,
    nullable: true,
    description: 'Runs that may be admitted at once (default: runs_per_second)',
  })
  runs_burst?: number | null;
  @ApiPropertyOptional({ type: Number, nullable: true, description: 'Runs running at the same time' })
  max_active_runs?: number | null;
  @ApiPropertyOptional({
    type: Number,
    nullable: true,
    description: 'Follow-ups waiting (steered or queued) at the same time',
  })
  max_steering_queue?: number | null;
  @ApiPropertyOptional({ type: Number, nullable: true, description: "Bytes held in storage by the workspace's runs" })
  max_storage_bytes?: number | null;
  @ApiPropertyOptional({ type: Number, nullable: true, description: 'Model tokens metered by the host per UTC day' })
  max_model_tokens_per_day?: number | null;
}

export class CreateWorkspaceDto {
  @ApiProperty({ description: '1-64 lowercase letters, digits, "_" or "-"' })
  @IsString()
  @IsNotEmpty()
  @MaxLength(64)
  workspace_id!: string;
  @ApiPropertyOptional({ description: 'Default: the id' }) @IsOptional() @IsString() @MaxLength(200) name?: string;
  @ApiPropertyOptional({
    type: WorkspaceQuotasDto,
    description: 'Absent quotas are unlimited (docs/tenancy.md#quotas)',
  })
  @IsOptional()
  @IsObject()
  quotas?: Record<string, unknown>;
}

export class UpdateWorkspaceDto {
  @ApiPropertyOptional({ type: String, nullable: true, description: '1-200 characters. Absent or null: unchanged' })
  @NullIsAbsent()
  @IsOptional()
  @IsString()
  @MaxLength(200)
  name?: string;
  @ApiPropertyOptional({ type: WorkspaceQuotasDto, description: 'Replaces every quota (absent: unlimited)' })
  @IsOptional()
  @IsObject()
  quotas?: Record<string, unknown>;
}

export class WorkspaceDto {
  @ApiProperty() workspace_id!: string;
  @ApiProperty() name!: string;
  @ApiProperty({ type: WorkspaceQuotasDto }) quotas!: WorkspaceQuotasDto;
  @ApiProperty() created_at!: string;
  @ApiProperty() updated_at!: string;
}

export class QuotaUsageDto {
  @ApiProperty() used!: number;
  @ApiProperty({ type: Number, nullable: true, description: 'null: unlimited' }) limit!: number | null;
}

export class WorkspaceUsageDto {
  @ApiProperty() workspace_id!: string;
  @ApiProperty({ type: QuotaUsageDto, description: 'Running runs' }) active_runs!: QuotaUsageDto;
  @ApiProperty({ type: QuotaUsageDto, description: 'Steered or queued follow-ups waiting' })
  steering_queue!: QuotaUsageDto;
  @ApiProperty({ type: QuotaUsageDto }) storage_bytes!: QuotaUsageDto;
  @ApiProperty({ type: QuotaUsageDto, description: 'Host-metered model tokens since 00:00 UTC' })
  model_tokens_today!: QuotaUsageDto;
  @ApiProperty({ type: QuotaUsageDto, description: 'Admission tokens left in the runs-per-second bucket' })
  runs_per_second!: QuotaUsageDto;
}
