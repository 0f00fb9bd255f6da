import type { ComponentChildren } from 'preact';
import { useCallback, useEffect, useRef, useState } from 'preact/hooks';
import { CallError } from './api/client';
import { href } from './lib/router';

export interface Loaded<T> {
  data: T | undefined;
  error: CallError | null;
  loading: boolean;
  reload: () => void;
}

function asCallError(e: unknown): CallError {
  return e instanceof CallError
    ? e
    : new CallError(0, {
        code: 'runtime_error',
        message: e instanceof Error ? e.message : String(e),
        retryable: false,
        details: {},
      });
}

/** Loads once per change of `deps`, and again every `everyMs` when given (live pages). */
export function useLoad<T>(fn: () => Promise<T>, deps: unknown[], everyMs?: number): Loaded<T> {
  const [data, setData] = useState<T>();
  const [error, setError] = useState<CallError | null>(null);
  const [loading, setLoading] = useState(true);
  const [tick, setTick] = useState(0);
  const reload = useCallback(() => setTick((t) => t + 1), []);
  useEffect(() => {
    let live = true;
    setLoading(true);
    fn().then(
      (d) => {
        if (live) {
          setData(d);
          setError(null);
          setLoading(false);
        }
      },
      (e: unknown) => {
        if (live) {
          setError(asCallError(e));
          setLoading(false);
        }
      },
    );
    return () => {
      live = false;
    };
  }, [...deps, tick]);
  useEffect(() => {
    if (!everyMs) {
      return;
    }
    const t = setInterval(reload, everyMs);
    return () => clearInterval(t);
  }, [everyMs, reload]);
  return { data, error, loading, reload };
}

export function run<T>(fn: () => Promise<T>): Promise<{ ok: true; value: T } | { ok: false; error: CallError }> {
  return fn().then(
    (value) => ({ ok: true as const, value }),
    (e: unknown) => ({ ok: false as const, error: asCallError(e) }),
  );
}

export function ErrorState({ error, onRetry }: { error: CallError; onRetry?: () => void }) {
  const title =
    error.status === 0
      ? 'The API is not reachable'
      : error.status === 401
        ? 'The key was refused (revoked or unknown)'
        : error.status === 403
          ? 'This key may not do that (an admin key is needed)'
          : `Error ${error.status}: ${error.error.code}`;
  return (
    <div class="state error" role="alert">
      <strong>{title}</strong>
      <p class="wrap">{error.message}</p>
      {onRetry && (
        <button type="button" onClick={onRetry}>
          Try again
        </button>
      )}
    </div>
  );
}

export function Empty({ children }: { children: ComponentChildren }) {
  return <p class="state empty">{children}</p>;
}

/** A loaded section: its spinner, error state, or content. */
export function Section<T>({ loaded, children }: { loaded: Loaded<T>; children: (data: T) => ComponentChildren }) {
  if (loaded.error) {
    return <ErrorState error={loaded.error} onRetry={loaded.reload} />;
  }
  if (loaded.data === undefined) {
    return (
      <p class="state" aria-busy="true">
        Loading…
      </p>
    );
  }
  return <>{children(loaded.data)}</>;
}

export function Status({ value }: { value: string }) {
  return <span class={`badge s-${value.replace(/[^a-z_-]/gi, '')}`}>{value}</span>;
}

export function Time({ at }: { at: string | number | null | undefined }) {
  if (at === null || at === undefined) {
    return <span class="muted">—</span>;
  }
  const d = new Date(at);
  return (
    <time dateTime={d.toISOString()} title={d.toISOString()}>
      {d.toLocaleString()}
    </time>
  );
}

export function Json({ value, label }: { value: unknown; label?: string }) {
  return (
    <pre class="json" aria-label={label} tabIndex={0}>
      {JSON.stringify(value, null, 2)}
    </pre>
  );
}

export function Link({ to, children, class: cls }: { to: string; children: ComponentChildren; class?: string }) {
  return (
    <a href={href(to)} class={cls}>
      {children}
    </a>
  );
}

export function Page({
  title,
  actions,
  children,
}: {
  title: string;
  actions?: ComponentChildren;
  children: ComponentChildren;
}) {
  const h = useRef<HTMLHeadingElement>(null);
  useEffect(() => {
    document.title = `${title} · Runner Host console`;
    // Focus moves to the new page's heading, so keyboard and screen-reader users land on it.
    h.current?.focus();
  }, [title]);
  return (
    <>
      <div class="page-head">
        <h1 tabIndex={-1} ref={h}>
          {title}
        </h1>
        {actions && <div class="actions">{actions}</div>}
      </div>
      {children}
    </>
  );
}

/** A table that scrolls sideways on a narrow screen instead of overflowing the page. */
export function Table({ caption, head, children }: { caption: string; head: string[]; children: ComponentChildren }) {
  return (
    <div class="table-wrap" tabIndex={0} role="region" aria-label={caption}>
      <table>
        <caption class="sr-only">{caption}</caption>
        <thead>
          <tr>
            {head.map((h) => (
              <th scope="col" key={h}>
                {h}
              </th>
            ))}
          </tr>
        </thead>
        <tbody>{children}</tbody>
      </table>
    </div>
  );
}

/** A form's text value, trimmed ('' when absent or a file). */
export function formText(form: FormData, name: string): string {
  const v = form.get(name);
  return typeof v === 'string' ? v.trim() : '';
}

/** A JSON value as display text: strings as they are, anything else as JSON. */
export function str(v: unknown): string {
  return typeof v === 'string' ? v : v === undefined ? '' : JSON.stringify(v);
}
