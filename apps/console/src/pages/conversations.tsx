import { api, call } from '../api/client';
import { navigate, type Location } from '../lib/router';
import { Empty, formText, Json, Link, Page, Section, Status, Table, Time, useLoad } from '../ui';

function Pick() {
  return (
    <form
      class="inline"
      onSubmit={(e) => {
        e.preventDefault();
        const f = new FormData(e.currentTarget);
        const id = formText(f, 'conversation_id');
        const agent = formText(f, 'agent_id');
        if (id) {
          navigate(`/conversations/${encodeURIComponent(id)}${agent ? `?agent_id=${encodeURIComponent(agent)}` : ''}`);
        }
      }}
    >
      <label for="conv-id">Conversation id</label>
      <input id="conv-id" name="conversation_id" required />
      <label for="conv-agent">Agent (optional)</label>
      <input id="conv-agent" name="agent_id" />
      <button type="submit">Open</button>
    </form>
  );
}

/** Conversations: pick one (or follow a link from a run); its transcript and its timeline. */
export function Conversations() {
  const recent = useLoad(() => call(api.GET('/v1/runs', { params: { query: { limit: 100 } } })), []);
  return (
    <Page title="Conversations">
      <Pick />
      <h2>Recently active</h2>
      <Section loaded={recent}>
        {(p) => {
          const seen = new Map<string, string>();
          for (const r of p.items) {
            if (r.conversation_id && !seen.has(r.conversation_id)) {
              seen.set(r.conversation_id, r.agent_id);
            }
          }
          return seen.size === 0 ? (
            <Empty>No conversation among the latest runs.</Empty>
          ) : (
            <ul class="plain">
              {[...seen].map(([c, a]) => (
                <li key={c} class="wrap">
                  <Link to={`/conversations/${encodeURIComponent(c)}?agent_id=${encodeURIComponent(a)}`}>{c}</Link>{' '}
                  <span class="muted">{a}</span>
                </li>
              ))}
            </ul>
          );
        }}
      </Section>
    </Page>
  );
}

export function Conversation({ id, loc }: { id: string; loc: Location }) {
  const agent = loc.query.get('agent_id') ?? undefined;
  const transcript = useLoad(
    () =>
      call(
        api.GET('/v1/conversations/{conversation_id}/transcript', {
          params: { path: { conversation_id: id }, query: { order: 'oldest', limit: 100 } },
        }),
      ),
    [id],
    5000,
  );
  const timeline = useLoad(
    () =>
      call(
        api.GET('/v1/admin/conversations/{conversation_id}/timeline', {
          params: { path: { conversation_id: id }, query: { agent_id: agent } },
        }),
      ),
    [id, agent],
    5000,
  );
  return (
    <Page title={`Conversation ${id}`}>
      <div class="two">
        <section aria-labelledby="h-transcript">
          <h2 id="h-transcript">Transcript</h2>
          <Section loaded={transcript}>
            {(p) =>
              p.items.length === 0 ? (
                <Empty>No message yet.</Empty>
              ) : (
                <ol class="transcript">
                  {p.items.map((m) => (
                    <li key={m.transcript_id} class={`bubble ${m.role}`}>
                      <span class="tl-kind">
                        {m.role}
                        {m.run_id && (
                          <>
                            {' · '}
                            <Link to={`/runs/${m.run_id}`}>run</Link>
                          </>
                        )}
                      </span>
                      <p class="wrap text">{m.content}</p>
                    </li>
                  ))}
                </ol>
              )
            }
          </Section>
        </section>
        <section aria-labelledby="h-conv-timeline">
          <h2 id="h-conv-timeline">Timeline</h2>
          <Section loaded={timeline}>
            {(t) =>
              t.entries.length === 0 ? (
                <Empty>Nothing happened in this conversation{agent ? ` for ${agent}` : ''}.</Empty>
              ) : (
                <Table caption="Conversation timeline" head={['at', 'what', 'run', 'detail']}>
                  {t.entries.map((e, i) => (
                    <tr key={i}>
                      <td>
                        <Time at={e.at} />
                      </td>
                      <td>
                        <Status value={e.type} />
                      </td>
                      <td class="wrap">
                        {e.run_id ? (
                          <Link to={`/runs/${e.run_id}`}>
                            <code>{e.run_id.slice(0, 8)}</code>
                          </Link>
                        ) : (
                          '—'
                        )}
                      </td>
                      <td class="wrap">
                        {Object.keys(e.detail).length ? <Json value={e.detail} label={`${e.type} detail`} /> : '—'}
                      </td>
                    </tr>
                  ))}
                </Table>
              )
            }
          </Section>
        </section>
      </div>
    </Page>
  );
}
