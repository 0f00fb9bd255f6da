import type { ValueTransformer } from 'typeorm';

/** Epoch milliseconds in a BIGINT column (PostgreSQL returns BIGINT as a string). */
export const epochMs: ValueTransformer = {
  to: (value: number | null | undefined) => value ?? null,
  from: (value: string | number | null) => (value === null || value === undefined ? null : Number(value)),
};

/** A JSON value as stored in a simple-json column (kept shallow so TypeORM's types stay finite). */
export type JsonValue = string | number | boolean | null | object;
export type JsonObject = { [key: string]: JsonValue };
