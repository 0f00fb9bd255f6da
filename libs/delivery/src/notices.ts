import type { NoticeKind } from './plan';

/** The default notices: short, no internals; a retry hint when retrying can help. */
export function noticeText(kind: NoticeKind, retryable: boolean): string {
  switch (kind) {
    case 'failed':
      return `Sorry, something went wrong and the answer could not be completed.${retryable ? ' Please try again.' : ''}`;
    case 'timeout':
      return 'Sorry, this took too long and was stopped. Please try again.';
    case 'cancelled':
      return 'The answer was cancelled.';
  }
}
