import { useEffect, useState } from 'preact/hooks';
import { api, call } from '../api/client';
import { navigate, type Location } from '../lib/router';
import { diffJson, snapshotHash } from '../lib/snapshot-hash';
import { Empty, formText, Json, Link, Page, Section, Status, Table, useLoad } from '../ui';

type Snap = Record<string, unknown> & {
  scope?: { agent_id?: string; runner_id?: string } & Record<string, unknown>;
  resources?: {
    models?: { model_id: string; operations: string[] }[];
    tools?: { tool_name: string; operations: string[] }[];
    knowledge_bases?: { kb_id: string; operations: string[] }[];
  };
  available_apis?: Record<string, boolean>;
};

/** The hash recomputed here with WebCrypto over the canonical JSON, against the one the host stored. */
function Verification({ snapshot, stored }: { snapshot: unknown; stored: string | null }) {
  const [computed, setComputed] = useState<string | null>(null);
  const [failure, setFailure] = useState<string | null>(null);
  useEffect(() => {
    setComputed(null);
    snapshotHash(snapshot).then(setComputed, (e: unknown) => setFailure(String(e)));
  }, [snapshot]);
  if (failure) {
    return <p class="state error">WebCrypto is not available here ({failure}).</p>;
  }
  if (computed === null) {
    return <p aria-busy="true">Hashing…</p>;
  }
  const ok = stored !== null && computed === stored;
  return (
    <div class={`verify ${ok ? 'good' : 'bad'}`} role="status" data-testid="hash-verdict">
      <strong>
        {ok
          ? '✓ Hash verified in this browser'
          : '✗ Hash mismatch: the stored snapshot does not hash to its recorded hash'}
      </strong>
      <dl class="kv">
        <dt>stored</dt>
        <dd class="wrap">
          <code>{stored ?? '—'}</code>
        </dd>
        <dt>computed</dt>
        <dd class="wrap">
          <code data-testid="hash-computed">{computed}</code>
        </dd>
      </dl>
    </div>
  );
}

function Granted({
  label,
  requested,
  granted,
}: {
  label: string;
  requested: string[] | null;
  granted: { id: string; ops: string[] }[];
}) {
  const grantedIds = new Set(granted.map((g) => g.id));
  const removed = (requested ?? []).filter((r) => !grantedIds.has(r));
  return (
    <div>
      <h3>{label}</h3>
      {granted.length === 0 && removed.length === 0 ? (
        <Empty>None asked, none granted.</Empty>
      ) : (
        <ul class="grants">
          {granted.map((g) => (
            <li key={g.id} class="good">
              <span class="sr-only">granted: </span>+ <code>{g.id}</code> <span class="muted">{g.ops.join(', ')}</span>
            </li>
          ))}
          {removed.map((r) => (
            <li key={r} class="bad">
              <span class="sr-only">removed: </span>− <code>{r}</code>{' '}
              <span class="muted">asked by the agent policy, not granted (manifest or catalogue)</span>
            </li>
          ))}
        </ul>
      )}
    </div>
  );
}

function Layers({ snap }: { snap: Snap }) {
  const agentId = snap.scope?.agent_id ?? '';
  const runnerId = snap.scope?.runner_id ?? '';
  const runners = useLoad(() => call(api.GET('/v1/admin/runners')), []);
  const agent = useLoad(
    () => call(api.GET('/v1/admin/agents/{agent_id}', { params: { path: { agent_id: agentId } } })),
    [agentId],
  );
  const policy = agent.data?.resource_policy;
  const res = snap.resources ?? {};
  return (
    <div class="layers">
      <section class="card" aria-labelledby="h-l1">
        <h2 id="h-l1">1. Runner manifest</h2>
        <Section loaded={runners}>
          {(list) => {
            const r = list.find((x) => x.runner_id === runnerId);
            return r ? (
              <>
                <p class="wrap">
                  <code>{runnerId}</code>
                </p>
                <h3>permissions</h3>
                <Json value={r.manifest.permissions} label="manifest permissions" />
                <h3>capabilities</h3>
                <Json value={r.manifest.capabilities} label="manifest capabilities" />
              </>
            ) : (
              <Empty>The runner {runnerId} is no longer registered.</Empty>
            );
          }}
        </Section>
      </section>
      <section class="card" aria-labelledby="h-l2">
        <h2 id="h-l2">2. Agent policy (as it is now)</h2>
        <Section loaded={agent}>
          {(a) => (
            <>
              <p>
                <Link to={`/agents/${encodeURIComponent(a.agent_id)}`}>{a.agent_id}</Link> version {a.version}
              </p>
              <Json value={a.resource_policy} label="resource policy" />
            </>
          )}
        </Section>
      </section>
      <section class="card" aria-labelledby="h-l3">
        <h2 id="h-l3">3. Run scope</h2>
        <Json value={snap.scope} label="run scope" />
      </section>
      <section class="card wide" aria-labelledby="h-res">
        <h2 id="h-res">Result: what the run was allowed</h2>
        <Granted
          label="models"
          requested={policy?.allowed_model_ids ?? null}
          granted={(res.models ?? []).map((m) => ({ id: m.model_id, ops: m.operations }))}
        />
        <Granted
          label="tools"
          requested={policy?.allow_all_tools ? null : (policy?.allowed_tool_names ?? null)}
          granted={(res.tools ?? []).map((t) => ({ id: t.tool_name, ops: t.operations }))}
        />
        <Granted
          label="knowledge bases"
          requested={policy?.allowed_kb_ids ?? null}
          granted={(res.knowledge_bases ?? []).map((k) => ({ id: k.kb_id, ops: k.operations }))}
        />
        <h3>host APIs</h3>
        <ul class="grants">
          {Object.entries(snap.available_apis ?? {}).map(([k, v]) => (
            <li key={k} class={v ? 'good' : 'bad'}>
              {v ? '+' : '−'} <code>{k}</code>
              <span class="sr-only">{v ? ' granted' : ' not granted'}</span>
            </li>
          ))}
        </ul>
      </section>
    </div>
  );
}

function Diff({ left, compareId }: { left: unknown; compareId: string }) {
  const other = useLoad(
    () => call(api.GET('/v1/admin/runs/{run_id}/authorization', { params: { path: { run_id: compareId } } })),
    [compareId],
  );
  return (
    <Section loaded={other}>
      {(o) => {
        const lines = diffJson(left, o.authorization).filter((l) => l.path !== 'run_id');
        return lines.length === 0 ? (
          <Empty>The two snapshots grant the same (the run ids aside).</Empty>
        ) : (
          <Table caption="Snapshot differences" head={['path', 'this run', compareId]}>
            {lines.map((l) => (
              <tr key={l.path} class={`diff-${l.kind}`}>
                <td class="wrap">
                  <code>{l.path}</code>
                </td>
                <td class="wrap">{l.left ?? <span class="muted">(absent)</span>}</td>
                <td class="wrap">{l.right ?? <span class="muted">(absent)</span>}</td>
              </tr>
            ))}
          </Table>
        );
      }}
    </Section>
  );
}

export function SnapshotPage({ runId, loc }: { runId: string; loc: Location }) {
  const compare = loc.query.get('compare') ?? '';
  const auth = useLoad(
    () => call(api.GET('/v1/admin/runs/{run_id}/authorization', { params: { path: { run_id: runId } } })),
    [runId],
  );
  return (
    <Page
      title="Authorization snapshot"
      actions={
        <Link to={`/runs/${runId}`} class="button">
          Back to the run
        </Link>
      }
    >
      <p class="wrap">
        Run <code>{runId}</code>: what it may touch, frozen at admission — manifest ∩ agent policy ∩ run scope.
      </p>
      <Section loaded={auth}>
        {(a) =>
          a.authorization === null ? (
            <Empty>This run has no snapshot (it never started).</Empty>
          ) : (
            <>
              <Verification snapshot={a.authorization} stored={a.authorization_hash} />
              <p>
                Host check: <Status value={a.hash_verified ? 'verified' : 'mismatch'} />
              </p>
              <Layers snap={a.authorization} />
              <section aria-labelledby="h-diff">
                <h2 id="h-diff">Compare with another run</h2>
                <form
                  class="inline"
                  onSubmit={(e) => {
                    e.preventDefault();
                    const v = formText(new FormData(e.currentTarget), 'compare');
                    navigate(`/runs/${runId}/snapshot${v ? `?compare=${encodeURIComponent(v)}` : ''}`);
                  }}
                >
                  <label for="compare">Other run id</label>
                  <input id="compare" name="compare" defaultValue={compare} key={compare} />
                  <button type="submit">Diff</button>
                </form>
                {compare && <Diff left={a.authorization} compareId={compare} />}
              </section>
              <details>
                <summary>The whole snapshot (JSON)</summary>
                <Json value={a.authorization} label="snapshot" />
              </details>
            </>
          )
        }
      </Section>
    </Page>
  );
}
