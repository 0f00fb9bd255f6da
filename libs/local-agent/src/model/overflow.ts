/*
 * Context-overflow classification of provider errors (docs/local-agent.md#overflow-retry): the error text matches
 * one of the providers' overflow phrasings and none of the throttling exclusions.
 */

const EXCLUSIONS = [/^(throttling error|service unavailable):/i, /rate limit/i, /too many requests/i];

const OVERFLOW = [
  /prompt is too long/i,
  /request_too_large/i,
  /input is too long for requested model/i,
  /exceeds the context window/i,
  /exceeds (?:the )?(?:model'?s )?maximum context length/i,
  /input token count.*exceeds the maximum/i,
  /maximum prompt length is \d+/i,
  /reduce the length of the messages/i,
  /maximum context length is \d+ tokens/i,
  /exceeds (?:the )?maximum allowed input length of \d+ tokens/i,
  /input \(\d+ tokens\) is longer than the model'?s context length \(\d+ tokens\)/i,
  /exceeds the limit of \d+/i,
  /exceeds the available context size/i,
  /greater than the context length/i,
  /context window exceeds limit/i,
  /exceeded model token limit/i,
  /too large for model with \d+ maximum context length/i,
  /model_context_window_exceeded/i,
  /prompt too long; exceeded (?:max )?context length/i,
  /context[_ ]length[_ ]exceeded/i,
  /context (?:length|window|size).*(?:exceeded|too long|overflow)/i,
  /(?:max|maximum) context (?:length|window|size)/i,
  /too many tokens/i,
  /token limit exceeded/i,
  /tokens? exceed(?:s|ed)?/i,
  /^4(?:00|13) (?:status code )?\(no body\)/i,
];

export function isContextOverflowText(text: string): boolean {
  const t = text.trim();
  if (EXCLUSIONS.some((r) => r.test(t))) {
    return false;
  }
  return OVERFLOW.some((r) => r.test(t));
}

/** An error is an overflow by its code `context_overflow` or by its message (also when wrapped). */
export function isContextOverflow(err: unknown): boolean {
  if (!err || typeof err !== 'object') {
    return typeof err === 'string' && isContextOverflowText(err);
  }
  const e = err as { code?: unknown; message?: unknown; cause?: unknown };
  if (e.code === 'context_overflow') {
    return true;
  }
  if (typeof e.message === 'string' && isContextOverflowText(e.message)) {
    return true;
  }
  return e.cause !== undefined && e.cause !== err && isContextOverflow(e.cause);
}
