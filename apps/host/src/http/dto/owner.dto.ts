import { applyDecorators } from '@nestjs/common';
import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { IsBoolean, IsOptional, IsString, MaxLength } from 'class-validator';

/** `workspace_id` of a created agent or resource (docs/tenancy.md#keys). */
export const WorkspaceOfWrite = () =>
  applyDecorators(
    ApiPropertyOptional({
      description:
        "The owning workspace (docs/tenancy.md): one of the caller's (403 otherwise). Default: the caller's only workspace; `default` for a global admin key.",
      example: 'default',
    }),
    IsOptional(),
    IsString(),
    MaxLength(64),
  );

/** `shared` of a created resource (docs/tenancy.md#resources). */
export const SharedOfWrite = () =>
  applyDecorators(
    ApiPropertyOptional({
      description:
        "Visible to every workspace's agents and runs, not only its own (global admin keys only). Default false.",
    }),
    IsOptional(),
    IsBoolean(),
  );

export const WorkspaceOfRow = () => ApiProperty({ description: 'The owning workspace (docs/tenancy.md)' });
export const SharedOfRow = () =>
  ApiProperty({ description: "Visible to every workspace's runs (docs/tenancy.md#resources)" });
