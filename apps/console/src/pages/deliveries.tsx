import { useState } from 'preact/hooks';
import { api, call } from '../api/client';
import type { Location } from '../lib/router';
import { navigate } from '../lib/router';
import { Empty, Link, Page, Section, Status, Table, Time, useLoad } from '../ui';
import { RetryButton } from './run';

/** Webhook ops that exhausted their retries (and the later ops of their runs), with a retry per run. */
export function Deliveries({ loc }: { loc: Location }) {
  const cursor = loc.query.get('cursor') ?? undefined;
  const failed = useLoad(
    () => call(api.GET('/v1/admin/deliveries/failed', { params: { query: { cursor, limit: 50 } } })),
    [cursor],
    5000,
  );
  const [note, setNote] = useState<string | null>(null);
  return (
    <Page title="Failed deliveries">
      {note && <p role="status">{note}</p>}
      <Section loaded={failed}>
        {(page) =>
          page.items.length === 0 ? (
            <Empty>No failed webhook op.</Empty>
          ) : (
            <>
              <Table
                caption="Failed webhook ops"
                head={['run', 'op', 'webhook', 'attempts', 'last error', 'created', '']}
              >
                {page.items.map((o, idx) => (
                  <tr key={o.delivery_id}>
                    <td class="wrap">
                      <Link to={`/runs/${o.run_id}`}>
                        <code>{o.run_id}</code>
                      </Link>{' '}
                      <span class="muted">#{o.sequence}</span>
                    </td>
                    <td>{o.op}</td>
                    <td class="wrap">
                      <Status value={o.webhook_state} /> <span class="muted">{o.webhook_url}</span>
                    </td>
                    <td>{o.attempts}</td>
                    <td class="wrap" data-testid="last-error">
                      {o.last_error ?? '—'}
                    </td>
                    <td>
                      <Time at={o.created_at} />
                    </td>
                    <td>
                      {page.items.findIndex((x) => x.run_id === o.run_id) === idx && (
                        <RetryButton
                          runId={o.run_id}
                          onDone={(n) => {
                            setNote(n);
                            failed.reload();
                          }}
                        />
                      )}
                    </td>
                  </tr>
                ))}
              </Table>
              {page.next_cursor && (
                <button type="button" onClick={() => navigate(`/deliveries?cursor=${page.next_cursor}`)}>
                  Older
                </button>
              )}
            </>
          )
        }
      </Section>
    </Page>
  );
}
