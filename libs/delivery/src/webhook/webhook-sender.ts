import * as http from 'node:http';
import * as https from 'node:https';
import { guardedLookup, literalBlocked } from './address-guard';

export interface WebhookAttempt {
  ok: boolean;
  /** HTTP status, or null when no response came (refused, timed out, blocked). */
  status: number | null;
  error: string | null;
}

/**
 * One POST of a webhook body: 2xx acknowledges; anything else — another status, no answer in
 * time, a refused or blocked address — is a failed attempt. Redirects are not followed (a
 * redirect could lead past the address guard). The response body is read and discarded.
 */
export function postWebhook(
  url: string,
  body: string,
  headers: Record<string, string>,
  opts: { timeoutMs: number; allowPrivate: boolean; signal?: AbortSignal },
): Promise<WebhookAttempt> {
  return new Promise((resolve) => {
    let target: URL;
    try {
      target = new URL(url);
    } catch {
      resolve({ ok: false, status: null, error: 'invalid webhook URL' });
      return;
    }
    const literal = opts.allowPrivate ? null : literalBlocked(target.hostname);
    if (literal) {
      resolve({
        ok: false,
        status: null,
        error: `${literal} is a private or loopback address (WEBHOOK_ALLOW_PRIVATE=false)`,
      });
      return;
    }
    const lib = target.protocol === 'https:' ? https : http;
    const req = lib.request(target, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), ...headers },
      lookup: opts.allowPrivate ? undefined : guardedLookup,
      timeout: opts.timeoutMs,
      agent: false,
      signal: opts.signal,
    });
    const timer = setTimeout(() => req.destroy(new Error(`no answer within ${opts.timeoutMs} ms`)), opts.timeoutMs);
    req.on('timeout', () => req.destroy(new Error(`no answer within ${opts.timeoutMs} ms`)));
    req.on('error', (e) => {
      clearTimeout(timer);
      resolve({ ok: false, status: null, error: e.message });
    });
    req.on('response', (res) => {
      res.resume();
      res.on('end', () => {
        clearTimeout(timer);
        const status = res.statusCode ?? 0;
        const ok = status >= 200 && status < 300;
        resolve({ ok, status, error: ok ? null : `HTTP ${status}` });
      });
      res.on('error', (e) => {
        clearTimeout(timer);
        resolve({ ok: false, status: res.statusCode ?? null, error: e.message });
      });
    });
    req.end(body);
  });
}
