/**
 * The authorization snapshot's hash, recomputed in the browser with WebCrypto: the same canonical
 * JSON as the host (`canonicalJson` in libs/authz/src/snapshot.builder.ts — object keys sorted,
 * undefined members dropped) and SHA-256 in lowercase hex. Kept in step with the host by the
 * console browser test, which checks a real run's snapshot verifies here.
 */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) {
    return `[${value.map(canonicalJson).join(',')}]`;
  }
  if (value && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
  }
  return JSON.stringify(value ?? null);
}

export async function sha256Hex(text: string): Promise<string> {
  const digest = await crypto.subtle.digest('SHA-256', new TextEncoder().encode(text));
  return Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, '0')).join('');
}

export async function snapshotHash(snapshot: unknown): Promise<string> {
  return sha256Hex(canonicalJson(snapshot));
}

export interface DiffLine {
  path: string;
  kind: 'added' | 'removed' | 'changed';
  left?: string;
  right?: string;
}

/** Leaves of a JSON value by path (`resources.tools[0].tool_name`), each as canonical JSON. */
function leaves(value: unknown, prefix: string, out: Map<string, string>): Map<string, string> {
  if (Array.isArray(value)) {
    if (value.length === 0) {
      out.set(prefix, '[]');
    }
    value.forEach((v, i) => leaves(v, `${prefix}[${i}]`, out));
  } else if (value && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>);
    if (entries.length === 0) {
      out.set(prefix, '{}');
    }
    for (const [k, v] of entries) {
      leaves(v, prefix ? `${prefix}.${k}` : k, out);
    }
  } else {
    out.set(prefix, canonicalJson(value));
  }
  return out;
}

/** What differs between two snapshots, leaf by leaf, in path order. */
export function diffJson(left: unknown, right: unknown): DiffLine[] {
  const a = leaves(left, '', new Map());
  const b = leaves(right, '', new Map());
  const paths = [...new Set([...a.keys(), ...b.keys()])].sort();
  const out: DiffLine[] = [];
  for (const p of paths) {
    const l = a.get(p);
    const r = b.get(p);
    if (l === r) {
      continue;
    }
    out.push({ path: p, kind: l === undefined ? 'added' : r === undefined ? 'removed' : 'changed', left: l, right: r });
  }
  return out;
}
