import { useState } from 'preact/hooks';
import { api, call, type Schemas } from '../api/client';
import { useRunStream } from '../lib/follow';
import type { TimelineItem } from '../lib/timeline';
import { Empty, Json, Link, Page, Section, Status, str, Table, Time, run, useLoad } from '../ui';

const ACTIVE = new Set(['queued', 'running']);

function Item({ item }: { item: TimelineItem }) {
  switch (item.kind) {
    case 'message':
      return (
        <li class={`tl message ${item.done ? '' : 'streaming'}`}>
          <span class="tl-kind">{item.role}</span>
          <p class="wrap text" data-testid="message-text">
            {item.text}
            {!item.done && <span class="caret" aria-hidden="true" />}
          </p>
        </li>
      );
    case 'tool':
      return (
        <li class="tl tool">
          <span class="tl-kind">tool call</span>
          <details open>
            <summary>
              <code>{item.tool_name}</code>{' '}
              {item.done ? (
                item.error ? (
                  <Status value="failed" />
                ) : (
                  <Status value="completed" />
                )
              ) : (
                <Status value="running" />
              )}
            </summary>
            <h3 class="sub">Arguments</h3>
            <Json value={item.parameters} label={`${item.tool_name} arguments`} />
            {item.done && (
              <>
                <h3 class="sub">{item.error ? 'Error' : 'Result'}</h3>
                {item.error ? (
                  <p class="wrap">{item.error}</p>
                ) : (
                  <Json value={item.result} label={`${item.tool_name} result`} />
                )}
              </>
            )}
          </details>
        </li>
      );
    case 'terminal':
      return (
        <li class={`tl terminal ${item.type === 'run.failed' ? 'bad' : 'good'}`} data-testid="terminal">
          <span class="tl-kind">{item.type}</span>
          <p class="wrap">
            {item.type === 'run.failed'
              ? `${str(item.data.code)}: ${str(item.data.error)}`
              : `finish reason: ${str(item.data.finish_reason ?? 'stop')}`}
            {item.source === 'host' && <span class="muted"> (a verdict of the host)</span>}
          </p>
        </li>
      );
    case 'other':
      return (
        <li class="tl other">
          <span class="tl-kind">{item.type}</span>
          <Json value={item.data} label={item.type} />
        </li>
      );
  }
}

function Deliveries({ runId }: { runId: string }) {
  const ops = useLoad(
    () => call(api.GET('/v1/admin/runs/{run_id}/deliveries', { params: { path: { run_id: runId } } })),
    [runId],
    5000,
  );
  const [note, setNote] = useState<string | null>(null);
  return (
    <Section loaded={ops}>
      {(list) => (
        <>
          {list.some((o) => o.webhook_state === 'failed') && (
            <RetryButton runId={runId} onDone={(n) => (setNote(n), ops.reload())} />
          )}
          {note && <p role="status">{note}</p>}
          {list.length === 0 ? (
            <Empty>No delivery op.</Empty>
          ) : (
            <Table caption="Delivery ops" head={['#', 'op', 'webhook', 'attempts', 'last error']}>
              {list.map((o) => (
                <tr key={o.delivery_id}>
                  <td>{o.sequence}</td>
                  <td>{o.op}</td>
                  <td>
                    <Status value={o.webhook_state} />
                  </td>
                  <td>{o.attempts}</td>
                  <td class="wrap">{o.last_error ?? '—'}</td>
                </tr>
              ))}
            </Table>
          )}
        </>
      )}
    </Section>
  );
}

export function RetryButton({ runId, onDone }: { runId: string; onDone: (note: string) => void }) {
  const [busy, setBusy] = useState(false);
  return (
    <button
      type="button"
      disabled={busy}
      onClick={() => {
        setBusy(true);
        void run(() =>
          call(api.POST('/v1/admin/runs/{run_id}/deliveries/retry', { params: { path: { run_id: runId } } })),
        ).then((r) => {
          setBusy(false);
          onDone(r.ok ? `${r.value.retried} op(s) queued again` : `Retry refused: ${r.error.message}`);
        });
      }}
    >
      Retry failed webhook ops
    </button>
  );
}

function Audit({ runId }: { runId: string }) {
  const audit = useLoad(
    () =>
      call(api.GET('/v1/admin/runs/{run_id}/audit', { params: { path: { run_id: runId }, query: { limit: 100 } } })),
    [runId],
    5000,
  );
  return (
    <Section loaded={audit}>
      {(page) =>
        page.items.length === 0 ? (
          <Empty>No host API call.</Empty>
        ) : (
          <Table caption="Audit log" head={['at', 'action', 'resource', 'outcome', 'error', 'µs']}>
            {page.items.map((a) => (
              <tr key={a.id}>
                <td>
                  <Time at={a.created_at} />
                </td>
                <td>
                  <code>{a.action}</code>
                </td>
                <td class="wrap">{a.resource ?? '—'}</td>
                <td>
                  <Status value={a.outcome} />
                </td>
                <td>{a.error_code ?? '—'}</td>
                <td>{a.duration_us}</td>
              </tr>
            ))}
          </Table>
        )
      }
    </Section>
  );
}

function Summary({ r }: { r: Schemas['RunDto'] }) {
  return (
    <dl class="kv">
      <dt>status</dt>
      <dd>
        <Status value={r.status} /> {r.status_reason && <span class="wrap">{r.status_reason}</span>}
      </dd>
      <dt>agent</dt>
      <dd class="wrap">{r.agent_id}</dd>
      <dt>runner</dt>
      <dd class="wrap">
        <code>{r.runner_id}</code>
      </dd>
      <dt>conversation</dt>
      <dd class="wrap">
        {r.conversation_id ? (
          <Link
            to={`/conversations/${encodeURIComponent(r.conversation_id)}?agent_id=${encodeURIComponent(r.agent_id)}`}
          >
            {r.conversation_id}
          </Link>
        ) : (
          '—'
        )}
      </dd>
      <dt>created</dt>
      <dd>
        <Time at={r.created_at} />
      </dd>
      <dt>finished</dt>
      <dd>
        <Time at={r.finished_at} />
      </dd>
      <dt>usage</dt>
      <dd>
        {r.usage.total_tokens ?? '?'} tokens ({r.usage.prompt_tokens ?? '?'} in, {r.usage.completion_tokens ?? '?'} out)
        {r.usage.host_metered && ` · host metered: ${r.usage.host_metered.calls} call(s)`}
      </dd>
      {r.error && (
        <>
          <dt>error</dt>
          <dd class="wrap">{r.error.code}</dd>
        </>
      )}
    </dl>
  );
}

export function RunPage({ runId }: { runId: string }) {
  const runLoaded = useLoad(
    () => call(api.GET('/v1/runs/{run_id}', { params: { path: { run_id: runId } } })),
    [runId],
    3000,
  );
  const { timeline, state, error } = useRunStream(runId);
  const [cancelNote, setCancelNote] = useState<string | null>(null);
  const [confirming, setConfirming] = useState(false);
  const active = runLoaded.data ? ACTIVE.has(runLoaded.data.status) : false;
  const cancel = () => {
    setConfirming(false);
    void run(() =>
      call(
        api.POST('/v1/runs/{run_id}/cancel', {
          params: { path: { run_id: runId } },
          body: { reason: 'cancelled from the admin console' },
        }),
      ),
    ).then((r) => {
      setCancelNote(r.ok ? 'Cancel requested.' : `Cancel refused: ${r.error.message}`);
      runLoaded.reload();
    });
  };
  return (
    <Page
      title={`Run ${runId}`}
      actions={
        <>
          <Link to={`/runs/${runId}/snapshot`} class="button">
            Authorization snapshot
          </Link>
          {active &&
            (confirming ? (
              <span class="confirm" role="group" aria-label="Confirm cancel">
                <button type="button" class="danger" onClick={cancel}>
                  Yes, cancel the run
                </button>
                <button type="button" onClick={() => setConfirming(false)}>
                  Keep it
                </button>
              </span>
            ) : (
              <button type="button" class="danger" onClick={() => setConfirming(true)}>
                Cancel run
              </button>
            ))}
        </>
      }
    >
      {cancelNote && <p role="status">{cancelNote}</p>}
      <Section loaded={runLoaded}>{(r) => <Summary r={r} />}</Section>
      <section aria-labelledby="h-timeline">
        <h2 id="h-timeline">
          Timeline{' '}
          <span class={`stream s-${state}`} data-testid="stream-state">
            {state}
          </span>
        </h2>
        {error && (
          <p class="state error" role="alert">
            The result stream stopped: {error}
          </p>
        )}
        {timeline.usage && (
          <p class="muted">
            usage: {timeline.usage.total_tokens ?? '?'} tokens ({timeline.usage.prompt_tokens ?? '?'} in,{' '}
            {timeline.usage.completion_tokens ?? '?'} out)
          </p>
        )}
        {timeline.items.length === 0 ? (
          <Empty>{state === 'ended' ? 'No result.' : 'Waiting for results…'}</Empty>
        ) : (
          <ol class="timeline" aria-busy={state !== 'ended'}>
            {timeline.items.map((i) => (
              <Item key={i.key} item={i} />
            ))}
          </ol>
        )}
      </section>
      <section aria-labelledby="h-deliveries">
        <h2 id="h-deliveries">Deliveries</h2>
        <Deliveries runId={runId} />
      </section>
      <section aria-labelledby="h-audit">
        <h2 id="h-audit">Audit log</h2>
        <Audit runId={runId} />
      </section>
    </Page>
  );
}
