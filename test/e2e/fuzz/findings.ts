/**
 * Broken properties found by a fuzz run, one per kind: a property that throws at its first
 * failure would hide every other defect of the same route group, so each case records what it
 * broke and the test fails at the end with the whole list (each with its first counterexample).
 */
export class Findings {
  private readonly byKind = new Map<string, { count: number; example: string }>();

  /** `kind` groups equal defects (route + status + message shape); `example` is the first input. */
  add(kind: string, example: string): void {
    const seen = this.byKind.get(kind);
    if (seen) {
      seen.count++;
    } else {
      this.byKind.set(kind, { count: 1, example: example.slice(0, 600) });
    }
  }

  /** One line per kind, for `expect(findings.list()).toEqual([])`. */
  list(): string[] {
    return [...this.byKind.entries()].map(([kind, { count, example }]) => `${kind} (×${count}) e.g. ${example}`);
  }
}

/** A message with its variable parts (numbers, quoted text, ids) blanked, to group equal defects. */
export function shape(message: string): string {
  return message
    .replace(/"[^"]*"|'[^']*'/g, '…')
    .replace(/[0-9a-f]{8}-[0-9a-f-]{27}/g, '<id>')
    .replace(/\d+/g, 'N')
    .split(/\s+/)
    .filter((w) => /^[\x20-\x7e…]+$/.test(w) && !w.includes('…'))
    .slice(0, 8)
    .join(' ');
}
