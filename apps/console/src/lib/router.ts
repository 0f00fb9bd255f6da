import { useEffect, useState } from 'preact/hooks';

/** The console lives under /console; every page is a URL of its own (history routing, deep links served by the host). */
export const BASE = '/console';

export interface Location {
  path: string;
  query: URLSearchParams;
}

function current(): Location {
  const p = location.pathname.startsWith(BASE) ? location.pathname.slice(BASE.length) : location.pathname;
  return { path: p.replace(/\/+$/, '') || '/', query: new URLSearchParams(location.search) };
}

const listeners = new Set<() => void>();
addEventListener('popstate', () => listeners.forEach((fn) => fn()));

/** Goes to a console path (`/runs/…?x=y`), adding a history entry unless replacing. */
export function navigate(to: string, replace = false): void {
  const url = `${BASE}${to === '/' ? '/' : to}`;
  if (replace) {
    history.replaceState(null, '', url);
  } else {
    history.pushState(null, '', url);
  }
  listeners.forEach((fn) => fn());
  if (!replace) {
    scrollTo(0, 0);
  }
}

export function href(to: string): string {
  return `${BASE}${to}`;
}

export function useLocation(): Location {
  const [loc, setLoc] = useState(current);
  useEffect(() => {
    const fn = () => setLoc(current());
    listeners.add(fn);
    return () => {
      listeners.delete(fn);
    };
  }, []);
  return loc;
}

/** Matches `/runs/:id` style patterns; the decoded params, or null. */
export function match(pattern: string, path: string): Record<string, string> | null {
  const a = pattern.split('/');
  const b = path.split('/');
  if (a.length !== b.length) {
    return null;
  }
  const params: Record<string, string> = {};
  for (let i = 0; i < a.length; i++) {
    if (a[i].startsWith(':')) {
      params[a[i].slice(1)] = decodeURIComponent(b[i]);
    } else if (a[i] !== b[i]) {
      return null;
    }
  }
  return params;
}

/** Plain left clicks on console links navigate in place; others (new tab, …) are left to the browser. */
export function onLinkClick(e: MouseEvent): void {
  const a = (e.target as Element | null)?.closest('a');
  if (!a || e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey || a.target) {
    return;
  }
  const url = new URL(a.href, location.href);
  if (url.origin !== location.origin || !url.pathname.startsWith(BASE)) {
    return;
  }
  e.preventDefault();
  navigate(url.pathname.slice(BASE.length) + url.search);
}
