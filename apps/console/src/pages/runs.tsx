import { useState } from 'preact/hooks';
import { api, call, type Schemas } from '../api/client';
import { navigate, type Location } from '../lib/router';
import { Empty, formText, Link, Page, Section, Status, Table, Time, useLoad } from '../ui';

type RunStatus = Schemas['RunDto']['status'];
const STATUSES: RunStatus[] = ['queued', 'running', 'completed', 'failed', 'cancelled', 'timeout', 'interrupted'];

/** Runs, newest first, filtered by agent, conversation, status (API filters) and a start time (on the pages loaded). */
export function Runs({ loc }: { loc: Location }) {
  const q = loc.query;
  const agent = q.get('agent_id') ?? '';
  const conversation = q.get('conversation_id') ?? '';
  const status = (q.get('status') ?? '').split(',').filter((s): s is RunStatus => (STATUSES as string[]).includes(s));
  const since = q.get('since') ?? '';
  const [pages, setPages] = useState<string[]>([]);
  const cursor = q.get('cursor') ?? undefined;
  const runs = useLoad(
    () =>
      call(
        api.GET('/v1/runs', {
          params: {
            query: {
              agent_id: agent || undefined,
              conversation_id: conversation || undefined,
              status: status.length ? status : undefined,
              cursor,
              limit: 50,
            },
          },
        }),
      ),
    [agent, conversation, status.join(','), cursor],
    5000,
  );
  const apply = (e: Event) => {
    e.preventDefault();
    const f = new FormData(e.currentTarget as HTMLFormElement);
    const next = new URLSearchParams();
    for (const name of ['agent_id', 'conversation_id', 'since']) {
      const v = formText(f, name);
      if (v) {
        next.set(name, v);
      }
    }
    const st = f.getAll('status').map(String);
    if (st.length) {
      next.set('status', st.join(','));
    }
    setPages([]);
    navigate(`/runs${next.size ? `?${next.toString()}` : ''}`);
  };
  const sinceMs = since ? Date.parse(since) : NaN;
  return (
    <Page title="Runs">
      <form class="filters" onSubmit={apply} aria-label="Filter runs" key={q.toString()}>
        <label>
          Agent
          <input name="agent_id" defaultValue={agent} />
        </label>
        <label>
          Conversation
          <input name="conversation_id" defaultValue={conversation} />
        </label>
        <label>
          Started after
          <input name="since" type="datetime-local" defaultValue={since} />
        </label>
        <fieldset>
          <legend>Status</legend>
          {STATUSES.map((s) => (
            <label key={s} class="check">
              <input type="checkbox" name="status" value={s} defaultChecked={status.includes(s)} />
              {s}
            </label>
          ))}
        </fieldset>
        <button type="submit">Filter</button>
      </form>
      <Section loaded={runs}>
        {(page) => {
          const items = Number.isNaN(sinceMs)
            ? page.items
            : page.items.filter((r) => Date.parse(r.created_at) >= sinceMs);
          return (
            <>
              {items.length === 0 ? (
                <Empty>No run matches.</Empty>
              ) : (
                <Table caption="Runs" head={['run', 'agent', 'conversation', 'status', 'created', 'duration']}>
                  {items.map((r) => (
                    <tr key={r.run_id}>
                      <td class="wrap">
                        <Link to={`/runs/${r.run_id}`}>
                          <code>{r.run_id}</code>
                        </Link>
                      </td>
                      <td class="wrap">{r.agent_id}</td>
                      <td class="wrap">
                        {r.conversation_id ? (
                          <Link
                            to={`/conversations/${encodeURIComponent(r.conversation_id)}?agent_id=${encodeURIComponent(r.agent_id)}`}
                          >
                            {r.conversation_id}
                          </Link>
                        ) : (
                          '—'
                        )}
                      </td>
                      <td>
                        <Status value={r.status} />
                      </td>
                      <td>
                        <Time at={r.created_at} />
                      </td>
                      <td>{r.duration_ms === null ? '—' : `${r.duration_ms} ms`}</td>
                    </tr>
                  ))}
                </Table>
              )}
              <nav class="pager" aria-label="Pages">
                {cursor && (
                  <button
                    type="button"
                    onClick={() => {
                      const prev = pages.slice(0, -1);
                      setPages(prev);
                      const next = new URLSearchParams(q);
                      if (prev.length) {
                        next.set('cursor', prev[prev.length - 1]);
                      } else {
                        next.delete('cursor');
                      }
                      navigate(`/runs?${next.toString()}`);
                    }}
                  >
                    Newer
                  </button>
                )}
                {page.next_cursor && (
                  <button
                    type="button"
                    onClick={() => {
                      setPages([...pages, page.next_cursor!]);
                      const next = new URLSearchParams(q);
                      next.set('cursor', page.next_cursor!);
                      navigate(`/runs?${next.toString()}`);
                    }}
                  >
                    Older
                  </button>
                )}
              </nav>
            </>
          );
        }}
      </Section>
    </Page>
  );
}
