import { api, call, type Schemas } from '../api/client';
import { Empty, Link, Page, Section, Status, Table, Time, useLoad } from '../ui';

function ItemRow({ i }: { i: Schemas['SteeringItemDto'] }) {
  return (
    <tr>
      <td>{i.id}</td>
      <td>{i.kind}</td>
      <td>
        <Status value={i.state} />
        {i.dispatch && <span class="muted"> · {i.dispatch}</span>}
      </td>
      <td class="wrap text-cell">{i.text}</td>
      <td class="wrap">
        {i.run_id ? (
          <Link to={`/runs/${i.run_id}`}>
            <code>{i.run_id}</code>
          </Link>
        ) : (
          '—'
        )}
        {i.next_run_id && (
          <>
            {' → '}
            <Link to={`/runs/${i.next_run_id}`}>
              <code>{i.next_run_id}</code>
            </Link>
          </>
        )}
      </td>
      <td>
        <Time at={i.created_at} />
      </td>
    </tr>
  );
}

/** Active runs with the follow-ups queued behind them, and the latest steering items (live). */
export function Steering() {
  const view = useLoad(() => call(api.GET('/v1/admin/steering', { params: { query: { limit: 50 } } })), [], 2000);
  return (
    <Page title="Steering">
      <Section loaded={view}>
        {(v) => (
          <>
            <section aria-labelledby="h-active-runs">
              <h2 id="h-active-runs">Active runs and their queues</h2>
              {v.active_runs.length === 0 ? (
                <Empty>No active run.</Empty>
              ) : (
                v.active_runs.map((r) => (
                  <article class="card" key={r.run_id} aria-label={`run ${r.run_id}`}>
                    <h3 class="wrap">
                      <Link to={`/runs/${r.run_id}`}>
                        <code>{r.run_id}</code>
                      </Link>
                    </h3>
                    <p class="wrap muted">
                      {r.agent_id} · {r.conversation_id ?? 'no conversation'} ·{' '}
                      {r.steering_pull ? 'pulls steering' : 'does not pull steering'} · started{' '}
                      <Time at={r.started_at} />
                    </p>
                    {r.queue.length === 0 ? (
                      <Empty>Nothing queued.</Empty>
                    ) : (
                      <ol class="queue">
                        {r.queue.map((q) => (
                          <li key={q.id} class="wrap">
                            <Status value={q.state} /> {q.text}
                          </li>
                        ))}
                      </ol>
                    )}
                  </article>
                ))
              )}
            </section>
            <section aria-labelledby="h-items">
              <h2 id="h-items">Follow-ups, newest first</h2>
              {v.items.length === 0 ? (
                <Empty>No follow-up yet.</Empty>
              ) : (
                <Table caption="Steering items" head={['#', 'kind', 'state', 'text', 'run', 'arrived']}>
                  {v.items.map((i) => (
                    <ItemRow key={i.id} i={i} />
                  ))}
                </Table>
              )}
            </section>
          </>
        )}
      </Section>
    </Page>
  );
}
