import { Fragment } from 'preact';
import { api, call } from '../api/client';
import { Empty, Link, Page, Section, Status, Table, Time, useLoad } from '../ui';

const LIVE_MS = 5000;
const STATUSES = ['queued', 'running', 'completed', 'failed', 'cancelled', 'timeout', 'interrupted'] as const;

async function readiness() {
  // 503 still carries the checks: read the body whatever the status.
  const { data, error, response } = await api.GET('/health/ready');
  return { status: response.status, body: data ?? (error as unknown as typeof data) };
}

export function Overview() {
  const runners = useLoad(() => call(api.GET('/v1/admin/runners')), [], LIVE_MS);
  const active = useLoad(
    () => call(api.GET('/v1/runs', { params: { query: { status: ['running', 'queued'], limit: 100 } } })),
    [],
    LIVE_MS,
  );
  const recent = useLoad(() => call(api.GET('/v1/runs', { params: { query: { limit: 100 } } })), [], LIVE_MS);
  const steering = useLoad(() => call(api.GET('/v1/admin/steering', { params: { query: { limit: 1 } } })), [], LIVE_MS);
  const failed = useLoad(
    () => call(api.GET('/v1/admin/deliveries/failed', { params: { query: { limit: 100 } } })),
    [],
    LIVE_MS,
  );
  const ready = useLoad(readiness, [], LIVE_MS);
  return (
    <Page title="Overview">
      <div class="cards">
        <section class="card" aria-labelledby="h-ready">
          <h2 id="h-ready">Readiness</h2>
          <Section loaded={ready}>
            {(r) => (
              <dl class="kv">
                <dt>status</dt>
                <dd>
                  <Status value={r.body?.status ?? 'unavailable'} />
                </dd>
                <dt>database</dt>
                <dd>{r.body?.checks.database}</dd>
                <dt>gRPC</dt>
                <dd>{r.body?.checks.grpc}</dd>
                {r.body?.details && (
                  <>
                    <dt>WAL</dt>
                    <dd>
                      {(r.body.details.wal_bytes / 1024).toFixed(0)} KiB, {r.body.details.checkpoints} checkpoints
                    </dd>
                  </>
                )}
              </dl>
            )}
          </Section>
        </section>
        <section class="card" aria-labelledby="h-active">
          <h2 id="h-active">Active runs</h2>
          <Section loaded={active}>
            {(p) => (
              <p class="big">
                <Link to="/runs?status=running,queued">{p.items.length === 100 ? '100+' : p.items.length}</Link>
              </p>
            )}
          </Section>
        </section>
        <section class="card" aria-labelledby="h-failed">
          <h2 id="h-failed">Failed deliveries</h2>
          <Section loaded={failed}>
            {(p) => (
              <p class="big">
                <Link to="/deliveries">{p.next_cursor ? '100+' : p.items.length}</Link>
              </p>
            )}
          </Section>
        </section>
        <section class="card" aria-labelledby="h-rate">
          <h2 id="h-rate">Runs per minute (last 10 min, newest 100)</h2>
          <Section loaded={recent}>
            {(p) => {
              const since = Date.now() - 10 * 60_000;
              const inWindow = p.items.filter((r) => Date.parse(r.created_at) >= since);
              const counts = STATUSES.map((s) => [s, inWindow.filter((r) => r.status === s).length] as const).filter(
                ([, n]) => n > 0,
              );
              return counts.length === 0 ? (
                <Empty>No runs in the last 10 minutes.</Empty>
              ) : (
                <dl class="kv">
                  {counts.map(([s, n]) => (
                    <Fragment key={s}>
                      <dt>
                        <Status value={s} />
                      </dt>
                      <dd>{(n / 10).toFixed(1)}/min</dd>
                    </Fragment>
                  ))}
                </dl>
              );
            }}
          </Section>
        </section>
      </div>

      <section aria-labelledby="h-runners">
        <h2 id="h-runners">Runners and plugins</h2>
        <Section loaded={runners}>
          {(list) =>
            list.length === 0 ? (
              <Empty>No runner is registered. Register a plugin on the Plugins page.</Empty>
            ) : (
              <Table caption="Runners" head={['runner', 'kind', 'state', 'connected since', 'last seen']}>
                {list.map((r) => (
                  <tr key={r.runner_id}>
                    <td class="wrap">
                      <strong>{r.name}</strong>
                      <br />
                      <code>{r.runner_id}</code>
                    </td>
                    <td>{r.kind}</td>
                    <td>
                      <Status value={r.state} />
                    </td>
                    <td>
                      <Time at={r.connected_at} />
                    </td>
                    <td>
                      <Time at={r.last_seen_at} />
                    </td>
                  </tr>
                ))}
              </Table>
            )
          }
        </Section>
      </section>

      <section aria-labelledby="h-queues">
        <h2 id="h-queues">Steering queue depths</h2>
        <Section loaded={steering}>
          {(v) =>
            v.active_runs.length === 0 ? (
              <Empty>No active run.</Empty>
            ) : (
              <Table caption="Steering queues" head={['run', 'agent', 'conversation', 'queued']}>
                {v.active_runs.map((r) => (
                  <tr key={r.run_id}>
                    <td class="wrap">
                      <Link to={`/runs/${r.run_id}`}>
                        <code>{r.run_id}</code>
                      </Link>
                    </td>
                    <td class="wrap">{r.agent_id}</td>
                    <td class="wrap">{r.conversation_id ?? '—'}</td>
                    <td>{r.queue.length}</td>
                  </tr>
                ))}
              </Table>
            )
          }
        </Section>
      </section>
    </Page>
  );
}
