import * as fs from 'node:fs';
import * as path from 'node:path';
import puppeteer, { type Browser, type Page } from 'puppeteer-core';
import { ADMIN_KEY, Host, TestDatabase, event, startDemoRunner, waitFor, type Proc } from './harness';

jest.setTimeout(180_000);

// What the functions evaluated in the page use (the test's tsconfig has no DOM lib); module-scoped.
declare const document: any;
declare const window: any;
declare const sessionStorage: any;
declare const localStorage: any;
declare const getComputedStyle: any;

/** Debian's chromium (scripts/browser-test.sh installs it); CHROMIUM_PATH overrides. */
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const ROOT = path.resolve(__dirname, '..', '..');
/** Screenshots of every step (gitignored): test-artifacts/console/. */
const ARTIFACTS = path.join(ROOT, 'test-artifacts', 'console');
const AXE = require.resolve('axe-core/axe.min.js');
const TEXT = 'the admin console assembles these streamed words into one message as they arrive';

interface AxeViolation {
  id: string;
  impact: string | null;
  help: string;
  nodes: { target: string[] }[];
}

/**
 * The admin console (apps/console, served by the host at /console) in headless Chromium against a
 * real host and the demo runner: sign-in, a run streaming live on its page, its authorization
 * snapshot verified in the browser, cancel from the UI, a steered follow-up on the steering page, a
 * failed webhook op and its retry, field-level validation errors, a revoked key; axe-core finds no
 * serious or critical violation on the main pages. Screenshots go to test-artifacts/console/.
 */
describe('admin console in headless Chromium', () => {
  const db = new TestDatabase();
  // Webhooks to a loopback address are refused (SSRF guard, WEBHOOK_ALLOW_PRIVATE off): the hooked
  // agent's ops fail after two attempts.
  const host = new Host(db, {
    RUNNERHOST_SECRET_HOOK: 'whsec-console-0123456789',
    WEBHOOK_RETRY_BASE_MS: '20',
    WEBHOOK_MAX_ATTEMPTS: '2',
  });
  let runner: Proc;
  let browser: Browser;
  let page: Page;
  const consoleErrors: string[] = [];
  /** Every API answer of 400 or above the page got: `<status> <method> <path>`. */
  const refused: string[] = [];

  const url = (p: string) => `${host.http}/console${p}`;
  const shot = async (name: string) => {
    await page.screenshot({ path: path.join(ARTIFACTS, `${name}.png`), fullPage: true });
  };
  const textOf = (selector: string) => page.$eval(selector, (e) => e.textContent ?? '');
  const waitText = (text: string, timeout = 30_000) =>
    page.waitForFunction((t: string) => document.body.innerText.includes(t), { timeout }, text);
  const heading = async () => textOf('h1');

  /** axe-core in the page: serious and critical violations (none expected). */
  const axe = async (): Promise<AxeViolation[]> => {
    await page.addScriptTag({ path: AXE });
    const result = await page.evaluate(async () => {
      const r = await window.axe.run(document, { resultTypes: ['violations'] });
      return r.violations as AxeViolation[];
    });
    return result
      .filter((v) => v.impact === 'serious' || v.impact === 'critical')
      .map((v) => ({ ...v, nodes: v.nodes.slice(0, 3) }));
  };

  const go = async (p: string, expectHeading: string | RegExp) => {
    await page.goto(url(p));
    await page.waitForFunction(
      (h: string, isRe: boolean) => {
        const t = document.querySelector('h1')?.textContent ?? '';
        return isRe ? new RegExp(h).test(t) : t === h;
      },
      { timeout: 30_000 },
      typeof expectHeading === 'string' ? expectHeading : expectHeading.source,
      typeof expectHeading !== 'string',
    );
  };

  beforeAll(async () => {
    fs.mkdirSync(ARTIFACTS, { recursive: true });
    await host.start();
    let runnerId: string;
    // DEMO_STEERING: the runner declares steering, so a follow-up to a busy conversation is steered.
    ({ runner, runnerId } = await startDemoRunner(host, { env: { DEMO_STEERING: '1' } }));
    for (const agent of [
      { agent_id: 'echo', runner_id: runnerId, runner_config: { mode: 'echo', chunk_delay_ms: 60 } },
      { agent_id: 'busy', runner_id: runnerId, runner_config: { mode: 'stall' } },
      {
        agent_id: 'hooked',
        runner_id: runnerId,
        runner_config: { mode: 'echo' },
        delivery_policy: { webhook: { url: 'http://127.0.0.1:9/hook', secret_env: 'RUNNERHOST_SECRET_HOOK' } },
      },
    ]) {
      expect((await host.api('POST', '/v1/admin/agents', agent)).status).toBe(201);
    }
    browser = await puppeteer.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox'] });
    page = await browser.newPage();
    // axe-core is injected as an inline script, which the console's CSP (script-src 'self') refuses.
    await page.setBypassCSP(true);
    await page.setViewport({ width: 1280, height: 900 });
    page.on('response', (res) => {
      if (res.status() >= 400) {
        refused.push(`${res.status()} ${res.request().method()} ${new URL(res.url()).pathname}`);
      }
    });
    page.on('console', (m) => {
      if (m.type() === 'error') {
        consoleErrors.push(m.text());
      }
    });
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await runner?.stop();
    await host?.stop();
    await db.drop();
  });

  it('is served at /console: index.html no-cache, hashed assets immutable, deep links get the page', async () => {
    const index = await fetch(url('/'));
    expect(index.status).toBe(200);
    expect(index.headers.get('content-type')).toContain('text/html');
    expect(index.headers.get('cache-control')).toBe('no-cache');
    expect(index.headers.get('content-security-policy')).toContain("connect-src 'self'");
    const html = await index.text();
    const asset = /src="(\/console\/assets\/[^"]+\.js)"/.exec(html)![1];
    // Everything is bundled: no script or style from another origin.
    expect(html).not.toMatch(/(src|href)="https?:/);
    const js = await fetch(`${host.http}${asset}`);
    expect(js.status).toBe(200);
    expect(js.headers.get('content-type')).toContain('javascript');
    expect(js.headers.get('cache-control')).toBe('public, max-age=31536000, immutable');
    const etag = js.headers.get('etag')!;
    expect((await fetch(`${host.http}${asset}`, { headers: { 'if-none-match': etag } })).status).toBe(304);
    const deep = await fetch(url('/runs/00000000-0000-4000-8000-000000000000/snapshot'));
    expect(deep.status).toBe(200);
    expect(await deep.text()).toBe(html);
    expect((await fetch(url('/assets/gone-1234.js'))).status).toBe(404);
    // The API is unchanged beside it, and needs its key as before.
    expect((await fetch(`${host.http}/v1/runs`)).status).toBe(401);
  });

  it('signs in with an admin key kept in sessionStorage only (a wrong key and a platform key are refused)', async () => {
    await page.goto(url('/'));
    await page.waitForSelector('#admin-key');
    await shot('01-sign-in');
    await page.type('#admin-key', 'not-a-key');
    await page.click('button[type=submit]');
    await page.waitForSelector('#key-error');
    expect(await textOf('#key-error')).toMatch(/refused/);
    const platform = (await host.api('POST', '/v1/admin/api-keys', { name: 'p', role: 'platform' })).body.key;
    await page.$eval('#admin-key', (e) => ((e as any).value = ''));
    await page.type('#admin-key', platform);
    await page.click('button[type=submit]');
    await page.waitForFunction(() => /admin key/.test(document.querySelector('#key-error')?.textContent ?? ''));

    await page.$eval('#admin-key', (e) => ((e as any).value = ''));
    await page.type('#admin-key', ADMIN_KEY);
    await page.click('button[type=submit]');
    await page.waitForFunction(() => document.querySelector('h1')?.textContent === 'Overview');
    const stored = await page.evaluate(() => ({
      session: Object.values(sessionStorage),
      local: Object.keys(localStorage).length,
      cookie: document.cookie,
    }));
    expect(stored).toEqual({ session: [ADMIN_KEY], local: 0, cookie: '' });
    await waitText('plugin:demo/echo/default');
    await waitText('connected');
    await shot('02-overview');
    expect(await axe()).toEqual([]);
  });

  it('shows a run streaming live on its page, then its assembled text, terminal, usage and deliveries', async () => {
    const r = await host.api('POST', '/v1/events', event('echo', TEXT));
    expect(r.status).toBe(202);
    const runId = r.body.run_id as string;
    await go('/runs', 'Runs');
    await page.waitForSelector(`a[href="/console/runs/${runId}"]`);
    expect(await axe()).toEqual([]);
    await shot('03-runs');
    // Keyboard: the run's link is reachable and opens with Enter.
    await page.focus(`a[href="/console/runs/${runId}"]`);
    await page.keyboard.press('Enter');
    await page.waitForFunction((id: string) => document.querySelector('h1')?.textContent === `Run ${id}`, {}, runId);
    expect(page.url()).toBe(url(`/runs/${runId}`));
    await page.waitForSelector('[data-testid=terminal]', { timeout: 60_000 });
    expect(await textOf('[data-testid=message-text]')).toBe(TEXT);
    expect(await textOf('[data-testid=terminal]')).toMatch(/run\.completed/);
    expect(await textOf('[data-testid=stream-state]')).toBe('ended');
    await shot('04-run-completed');
    expect(await axe()).toEqual([]);
  });

  it("verifies a run's authorization snapshot hash in the browser and diffs two runs' snapshots", async () => {
    const runs = (await host.api('GET', '/v1/runs?agent_id=echo')).body.items as { run_id: string }[];
    const runId = runs[0].run_id;
    const other = await host.api('POST', '/v1/events', event('hooked', 'another agent'));
    const stored = (await host.api('GET', `/v1/admin/runs/${runId}/authorization`)).body;
    expect(stored.authorization_hash).toMatch(/^[0-9a-f]{64}$/);
    await go(`/runs/${runId}/snapshot`, 'Authorization snapshot');
    await page.waitForSelector('[data-testid=hash-verdict]');
    expect(await textOf('[data-testid=hash-verdict]')).toMatch(/Hash verified in this browser/);
    expect(await textOf('[data-testid=hash-computed]')).toBe(stored.authorization_hash);
    await waitText('1. Runner manifest');
    await shot('05-snapshot');
    expect(await axe()).toEqual([]);

    await page.type('#compare', other.body.run_id);
    await page.click('form.inline button[type=submit]');
    await waitText('scope.agent_id');
    expect(page.url()).toBe(url(`/runs/${runId}/snapshot?compare=${other.body.run_id}`));
    expect(await page.$eval('table', (t) => t.textContent)).toContain('"hooked"');
    await shot('06-snapshot-diff');
  });

  it('shows a steered follow-up on the steering page, then cancels the busy run from its page', async () => {
    const conversation = { conversation: { conversation_id: 'console-steer' } };
    const first = await host.api('POST', '/v1/events', event('busy', 'a long job', conversation));
    const runId = first.body.run_id as string;
    await waitFor(
      'busy run running',
      async () => (await host.api('GET', `/v1/runs/${runId}`)).body.status === 'running',
    );
    const follow = await host.api('POST', '/v1/events', event('busy', 'and one more thing, please', conversation));
    expect(follow.body).toMatchObject({ disposition: 'steered', run_id: runId });

    await go('/steering', 'Steering');
    await page.waitForSelector(`article[aria-label="run ${runId}"]`);
    expect(await textOf(`article[aria-label="run ${runId}"]`)).toContain('and one more thing, please');
    await shot('07-steering');
    expect(await axe()).toEqual([]);

    await go(`/runs/${runId}`, `Run ${runId}`);
    // Live: the first delta is on the page while the run is still going.
    await page.waitForFunction(() => document.querySelector('[data-testid=stream-state]')?.textContent === 'live');
    await page.waitForSelector('[data-testid=message-text]');
    expect(await page.$('[data-testid=terminal]')).toBeNull();
    await shot('08-run-live');
    const [cancel] = await page.$$('xpath/.//button[text()="Cancel run"]');
    await cancel.click();
    const [confirm] = await page.$$('xpath/.//button[text()="Yes, cancel the run"]');
    await confirm.click();
    await page.waitForSelector('[data-testid=terminal]', { timeout: 60_000 });
    await waitText('cancelled');
    expect((await host.api('GET', `/v1/runs/${runId}`)).body.status).toBe('cancelled');
    await shot('09-run-cancelled');
  });

  it('lists a failed webhook op with its last error, and retries it', async () => {
    const r = await host.api('POST', '/v1/events', event('hooked', 'to a webhook that cannot be reached'));
    const runId = r.body.run_id as string;
    await waitFor('failed op', async () => {
      const page = (await host.api('GET', '/v1/admin/deliveries/failed?limit=100')).body;
      return page.items.some((o: { run_id: string }) => o.run_id === runId);
    });
    await go('/deliveries', 'Failed deliveries');
    await page.waitForSelector(`a[href="/console/runs/${runId}"]`);
    const errors = await page.$$eval('[data-testid=last-error]', (cells) => cells.map((c) => c.textContent ?? ''));
    expect(errors.some((e) => /private|loopback|not allowed|address/i.test(e))).toBe(true);
    await shot('10-deliveries-failed');
    expect(await axe()).toEqual([]);
    const [retry] = await page.$$('xpath/.//button[text()="Retry failed webhook ops"]');
    await retry.click();
    await waitText('queued again');
  });

  it('shows the field the API names when an edit is refused, and saves a valid one', async () => {
    await go('/agents/echo', 'agent echo');
    await page.waitForSelector('#f-resource_policy');
    await page.$eval('#f-resource_policy', (e) => ((e as any).value = ''));
    await page.type('#f-resource_policy', '{"allowed_model_ids": ["no-such-model"]}');
    await page.click('form.editor button[type=submit]');
    await page.waitForSelector('[data-testid=error-resource_policy]');
    expect(await textOf('[data-testid=error-resource_policy]')).toMatch(
      /resource_policy\.allowed_model_ids\[0\].*no-such-model/,
    );
    expect(await page.$eval('#f-resource_policy', (e) => e.getAttribute('aria-invalid'))).toBe('true');
    await shot('11-agent-field-error');
    expect(await axe()).toEqual([]);

    await page.$eval('#f-description', (e) => ((e as any).value = ''));
    await page.type('#f-description', 'edited in the console');
    await page.$eval('#f-resource_policy', (e) => ((e as any).value = ''));
    await page.type('#f-resource_policy', '{}');
    const editedField = await page.$('#f-description');
    await page.click('form.editor button[type=submit]');
    await waitText('Saved.');
    expect((await host.api('GET', '/v1/admin/agents/echo')).body.description).toBe('edited in the console');
    // The page reloads the agent (its new version) and redraws the editor: wait for the old field
    // to leave the page, so the second edit is typed into the reloaded form (not refused as stale).
    await page.waitForFunction((el: any) => !el.isConnected, {}, editedField);
    await page.waitForFunction(() => document.querySelector('#f-description')?.value === 'edited in the console');
    await page.$eval('#f-description', (e) => ((e as any).value = ''));
    await page.type('#f-description', 'edited in the console, twice');
    await page.click('form.editor button[type=submit]');
    await waitFor('second edit saved', async () => {
      const agent = (await host.api('GET', '/v1/admin/agents/echo')).body;
      return agent.description === 'edited in the console, twice' && agent;
    });
  });

  it('reads well on a phone and in dark mode; long text wraps without a sideways scroll', async () => {
    await page.setViewport({ width: 390, height: 844 });
    await go('/steering', 'Steering');
    await page.waitForSelector('table');
    const overflow = await page.evaluate(
      () => document.documentElement.scrollWidth - document.documentElement.clientWidth,
    );
    expect(overflow).toBeLessThanOrEqual(0);
    await shot('12-phone-steering');
    await page.emulateMediaFeatures([{ name: 'prefers-color-scheme', value: 'dark' }]);
    await go('/', 'Overview');
    await waitText('connected');
    const bg = await page.evaluate(() => getComputedStyle(document.body).backgroundColor);
    expect(bg).toBe('rgb(21, 24, 28)');
    expect(await axe()).toEqual([]);
    await shot('13-phone-overview-dark');
    await page.emulateMediaFeatures([]);
    await page.setViewport({ width: 1280, height: 900 });
  });

  it('says so when the API is down', async () => {
    // A request the page makes fails at the network level, as when the host is unreachable.
    await page.setRequestInterception(true);
    const block = (req: any) => (req.url().includes('/v1/') ? req.abort('connectionrefused') : req.continue());
    page.on('request', block);
    await go('/runs', 'Runs');
    await waitText('The API is not reachable');
    await shot('14-api-down');
    page.off('request', block);
    await page.setRequestInterception(false);
  });

  it('signs out when the key is revoked, and says why', async () => {
    const created = (await host.api('POST', '/v1/admin/api-keys', { name: 'short-lived', role: 'admin' })).body;
    await page.evaluate((k: string) => sessionStorage.setItem('runner-host.console.admin-key', k), created.key);
    await go('/', 'Overview');
    expect((await host.api('DELETE', `/v1/admin/api-keys/${created.id}`)).status).toBe(204);
    await page.waitForSelector('#admin-key', { timeout: 30_000 }); // the next live refresh gets 401
    await waitText('revoked');
    expect(await page.evaluate(() => sessionStorage.length)).toBe(0);
    expect(await heading()).toBe('Runner Host console');
    await shot('15-key-revoked');
    // No script error; the only refused calls are those the steps asked for.
    expect(consoleErrors.filter((e) => !/^Failed to load resource/.test(e))).toEqual([]);
    const unexpected = refused.filter(
      (r) =>
        r !== '400 PUT /v1/admin/agents/echo' && // the edit naming an unregistered model
        r !== '403 GET /v1/admin/runners' && // the platform key at sign-in
        !/^401 GET \/v1\//.test(r), // the wrong key at sign-in; the live refreshes after the revocation
    );
    expect(unexpected).toEqual([]);
  });
});
