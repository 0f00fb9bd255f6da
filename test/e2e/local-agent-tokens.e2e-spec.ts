import * as fs from 'node:fs';
import * as path from 'node:path';
import { scripts } from '@libs/testing';
import { LocalAgentWorld, shown } from './local-agent-setup';

/*
 * Token counting never freezes the host: inputs whose exact BPE would take seconds to minutes
 * (one unbroken word, CJK text without spaces, a skill with a 250 KB one-word description) go to
 * the built-in local agent — whose context budgeting counts tokens through the host's
 * count_tokens on the model's o200k_base tokenizer — while a client keeps probing
 * `/health/live`: every run completes and every probe is answered (each within a generous 2 s,
 * where the unbounded count held the event loop 8 to 18 s). A host that is counting still ends
 * on SIGTERM. SQLite by default, PostgreSQL with E2E_DATABASE=postgres.
 */

jest.setTimeout(240_000);

/** Probes `/health/live` one request after another until stopped. */
class LiveProbe {
  ok = 0;
  readonly failed: string[] = [];
  private running = true;
  private readonly done: Promise<void>;

  constructor(url: string) {
    this.done = this.loop(url);
  }

  private async loop(url: string): Promise<void> {
    while (this.running) {
      try {
        const res = await fetch(url, { signal: AbortSignal.timeout(2_000) });
        await res.arrayBuffer();
        if (res.ok) {
          this.ok++;
        } else {
          this.failed.push(`status ${res.status}`);
        }
      } catch (e) {
        this.failed.push(e instanceof Error ? `${e.name}: ${e.message}` : String(e));
      }
      await new Promise((r) => setTimeout(r, 20));
    }
  }

  async stop(): Promise<{ ok: number; failed: string[] }> {
    this.running = false;
    await this.done;
    return { ok: this.ok, failed: this.failed };
  }
}

describe('the local agent counts tokens of hostile inputs without freezing the host', () => {
  // No shutdown grace (docs/deployment.md#graceful-shutdown): SIGTERM ends the counting run at once.
  const world = new LocalAgentWorld({ SHUTDOWN_GRACE_MS: '0' });
  const { host } = world;
  const hugeDescription = 'w'.repeat(250_000);

  beforeAll(async () => {
    const big = path.join(world.skillsDir, 'huge-description');
    fs.mkdirSync(big, { recursive: true });
    fs.writeFileSync(
      path.join(big, 'SKILL.md'),
      `---\nname: huge-description\ndescription: ${hugeDescription}\n---\nHi.\n`,
    );
    await world.start();
    await world.agent('counter');
  });

  afterAll(() => world.stop());

  beforeEach(() => world.server.reset());

  /** Runs `say` then waits for the run's end, probing meanwhile; answers the run and the probes. */
  async function probed(conversationId: string, text: string) {
    const probe = new LiveProbe(`${host.http}/health/live`);
    try {
      const runId = await world.say('counter', conversationId, text);
      const events = await world.results(runId);
      return { runId, events, probes: await probe.stop() };
    } finally {
      await probe.stop();
    }
  }

  it.each([
    ['16,000 characters of one unbroken word', 'conv-word', 'x'.repeat(16_000)],
    [
      '3,000 CJK characters without a space',
      'conv-cjk',
      '我们今天去公园散步天气很好阳光明媚'.repeat(177).slice(0, 3000),
    ],
  ])('%s: the run completes, and so does the next turn that counts it again as history', async (_, conv, text) => {
    world.server.chat(scripts.reply('First answer.'), scripts.reply('Second answer.'));
    const first = await probed(conv, text);
    expect(first.events.at(-1)!.data).toMatchObject({ type: 'run.completed' });
    expect(first.probes.failed).toEqual([]);
    expect(first.probes.ok).toBeGreaterThan(0);

    const second = await probed(conv, 'And now?');
    expect(second.events.at(-1)!.data).toMatchObject({ type: 'run.completed' });
    expect(second.probes.failed).toEqual([]);
    expect(second.probes.ok).toBeGreaterThan(0);

    // The model saw the long message whole in both turns (it fits a 128k window), and the
    // budgeting went through the host's count_tokens.
    const [one, two] = world.chats();
    expect(shown(one.messages)).toContain(text);
    expect(shown(two.messages)).toContain(text);
    const counts = (await world.audit(second.runId)).filter((a) => a.action === 'model.count_tokens');
    expect(counts.length).toBeGreaterThan(0);
    expect(counts.every((a) => a.outcome === 'allowed')).toBe(true);
  });

  it('loads a skill with a 250 KB one-word description; the index shows its first 1024 characters', async () => {
    world.server.chat(scripts.reply('Skills seen.'));
    const run = await probed('conv-skill-desc', 'Which skills do you have?');
    expect(run.events.at(-1)!.data).toMatchObject({ type: 'run.completed' });
    expect(run.probes.failed).toEqual([]);
    const [call] = world.chats();
    const index = shown(call.messages);
    expect(index).toContain('<name>huge-description</name>');
    expect(index).toContain(`<description>${'w'.repeat(1023)}…</description>`);
    expect(index).not.toContain('w'.repeat(1024));
  });

  it('a host that is counting ends on SIGTERM', async () => {
    // ~60,000 CJK characters: the first count of it alone runs to its 1 s time budget (the exact BPE
    // would take hours), so the signal sent as soon as the run is admitted arrives while the host is
    // budgeting the run's context — before any model request. (Waiting for the count's audit row
    // first would race: once the budget has answered, the rest of the run can finish at once.)
    world.server.chat(scripts.reply('never sent'));
    const runId = await world.say('counter', 'conv-sigterm', '中文字符测试'.repeat(10_000));
    expect(['completed', 'failed', 'cancelled', 'interrupted']).not.toContain((await world.run(runId)).status);
    await host.proc.stop('SIGTERM');
    expect(host.proc.child.exitCode !== null || host.proc.child.signalCode !== null).toBe(true);
    expect(world.chats()).toEqual([]);
  });
});
