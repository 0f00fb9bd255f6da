import type { ResultEvent } from './demo-host';

/* How the demo prints: sections, the agent's streamed text as it arrives, tool calls, admin views. */

const out = (line: string) => process.stdout.write(`${line}\n`);

export function section(title: string): void {
  out(`\n── ${title} ${'─'.repeat(Math.max(0, 70 - title.length))}`);
}

export function say(line: string): void {
  out(`  ${line}`);
}

const clip = (text: string, max = 90) => (text.length <= max ? text : `${text.slice(0, max - 1)}…`);

/** The agent's text as it streams: each delta's new text is written as it arrives. */
export class StreamPrinter {
  private shown = '';
  private deltas = 0;
  private open = false;

  show(e: ResultEvent): void {
    if (e.type.startsWith('tool.call.')) {
      this.close();
      toolLine(e);
      return;
    }
    if (e.type !== 'message.delta') {
      return;
    }
    const content = typeof e.data?.chunk?.content === 'string' ? (e.data.chunk.content as string) : '';
    // A chunk may carry the new text or the text so far: print only what was not shown yet.
    const fresh = content.startsWith(this.shown) ? content.slice(this.shown.length) : content;
    this.shown = content.startsWith(this.shown) ? content : this.shown + content;
    this.deltas++;
    if (fresh === '') {
      return;
    }
    if (!this.open) {
      process.stdout.write('  agent> ');
      this.open = true;
    }
    process.stdout.write(fresh);
  }

  private close(): void {
    if (this.open) {
      process.stdout.write('\n');
      this.open = false;
    }
  }

  end(last: ResultEvent | undefined, runId: string): void {
    this.close();
    const outcome =
      last?.type === 'run.completed'
        ? 'completed'
        : `${last?.type ?? 'no result'} (${String(last?.data?.code ?? '')}: ${clip(String(last?.data?.error ?? ''), 60)})`;
    say(`[run ${runId}: ${outcome}; ${this.deltas} streamed deltas]`);
  }
}

function toolLine(e: ResultEvent): void {
  const d = e.data as { tool_name: string; parameters?: unknown; result?: unknown; error?: string | null };
  if (e.type === 'tool.call.started') {
    say(`↳ tool ${d.tool_name}(${JSON.stringify(d.parameters ?? {})})`);
  } else {
    say(`↳ ${d.error ? `error: ${clip(d.error)}` : `result: ${clip(JSON.stringify(d.result))}`}`);
  }
}

export function snapshotSummary(view: any): void {
  const snapshot = view.authorization ?? {};
  const verified = view.hash_verified === true ? ' (verified)' : ' (NOT verified)';
  say(`authorization snapshot  ${String(view.authorization_hash ?? '')}${verified}`);
  const resources = snapshot.resources ?? {};
  const names = (list: any[] | undefined, key: string) =>
    (list ?? []).map((r) => `${r[key]} [${(r.operations ?? []).join(', ')}]`).join('; ') || 'none';
  say(`  models  ${names(resources.models, 'model_id')}`);
  say(`  tools   ${names(resources.tools, 'tool_name')}`);
  const apis = Object.entries(snapshot.available_apis ?? {})
    .filter(([, on]) => on)
    .map(([api]) => api);
  say(`  apis    ${apis.join(', ') || 'none'}`);
  if (snapshot.deadline_at_ms) {
    say(`  deadline ${new Date(snapshot.deadline_at_ms as number).toISOString()}`);
  }
}

export function auditTable(rows: any[]): void {
  say('audit log (every host API call of the run, as for any plugin):');
  say(`  ${'action'.padEnd(20)}${'resource'.padEnd(26)}${'outcome'.padEnd(9)}${'µs'.padStart(8)}  caller`);
  for (const r of rows) {
    say(
      `  ${String(r.action).padEnd(20)}${String(r.resource ?? r.scope ?? '-').padEnd(26)}${String(r.outcome).padEnd(9)}${String(r.duration_us).padStart(8)}  ${r.plugin_id} / ${r.runner_id}`,
    );
  }
}
