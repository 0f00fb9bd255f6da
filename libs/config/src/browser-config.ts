/**
 * What browsers may do: which origins may call the API cross-origin (CORS_ALLOWED_ORIGINS, off by
 * default) and how long a run-scoped stream token (for EventSource) stays valid.
 */
export interface BrowserConfig {
  /** Allowed origins, exactly as browsers send them (`https://console.example.com`); empty = CORS off. */
  corsOrigins: readonly string[];
  /** `*`: any origin (the API uses bearer keys, never cookies, so no credentials mode is involved). */
  corsAnyOrigin: boolean;
  streamTokenTtlMs: number;
}

/** The whole variable: `*`, or comma-separated origins. */
export const CORS_ORIGINS_PATTERN = /^\s*(\*|https?:\/\/[^\s,/]+(\s*,\s*https?:\/\/[^\s,/]+)*)\s*$/;

export function browserConfigOf(
  corsOrigins: string | undefined,
  streamTokenTtlSeconds: number | undefined,
): BrowserConfig {
  const entries = (corsOrigins ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
  return {
    corsAnyOrigin: entries.includes('*'),
    // Browsers send the origin's scheme and host lower-cased.
    corsOrigins: entries.filter((e) => e !== '*').map((e) => e.toLowerCase()),
    streamTokenTtlMs: (streamTokenTtlSeconds ?? 300) * 1000,
  };
}
