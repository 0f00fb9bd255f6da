import { useState } from 'preact/hooks';
import { api, call, CallError, type Schemas } from '../api/client';
import { navigate } from '../lib/router';
import { Empty, ErrorState, Link, Page, Section, Status, str, Table, run, useLoad } from '../ui';

type Json = Record<string, unknown>;

interface Field {
  name: string;
  type: 'text' | 'json' | 'number' | 'bool' | 'select';
  options?: string[];
  required?: boolean;
  /** Part of the id: set at creation, shown read-only after. */
  key?: boolean;
  help?: string;
}

interface Row {
  id: string;
  cells: (string | number | boolean | null)[];
}

/** One kind of admin resource: how to list, read, write and delete it, and the fields of its form. */
export interface ResourceKind {
  path: string;
  title: string;
  singular: string;
  columns: string[];
  fields: Field[];
  list: () => Promise<Row[]>;
  get?: (id: string) => Promise<Json>;
  create?: (body: Json) => Promise<unknown>;
  replace?: (id: string, body: Json, current: Json) => Promise<unknown>;
  remove?: (id: string) => Promise<unknown>;
}

const jsonField = (name: string, help?: string): Field => ({ name, type: 'json', help });

export const RESOURCE_KINDS: ResourceKind[] = [
  {
    path: 'agents',
    title: 'Agents',
    singular: 'agent',
    columns: ['agent', 'runner', 'version'],
    fields: [
      { name: 'agent_id', type: 'text', required: true, key: true },
      { name: 'runner_id', type: 'text', required: true, help: 'e.g. plugin:demo/echo/default' },
      { name: 'description', type: 'text' },
      jsonField('runner_config', 'checked against the runner’s config_schema'),
      jsonField('resource_policy'),
      jsonField('state_policy'),
      jsonField('delivery_policy'),
      jsonField('concurrency_policy'),
    ],
    list: async () =>
      (await call(api.GET('/v1/admin/agents', { params: { query: { limit: 100 } } }))).items.map((a) => ({
        id: a.agent_id,
        cells: [a.agent_id, a.runner_id, a.version],
      })),
    get: async (id) => await call(api.GET('/v1/admin/agents/{agent_id}', { params: { path: { agent_id: id } } })),
    create: (body) => call(api.POST('/v1/admin/agents', { body: body as Schemas['CreateAgentDto'] })),
    // The optimistic version: refused (409) when someone changed the agent since it was loaded.
    replace: (id, body, current) =>
      call(
        api.PUT('/v1/admin/agents/{agent_id}', {
          params: { path: { agent_id: id } },
          body: { ...body, version: current.version } as Schemas['ReplaceAgentDto'],
        }),
      ),
    remove: (id) => call(api.DELETE('/v1/admin/agents/{agent_id}', { params: { path: { agent_id: id } } })),
  },
  {
    path: 'models',
    title: 'Models',
    singular: 'model',
    columns: ['model', 'kind', 'provider', 'name', 'key set'],
    fields: [
      { name: 'model_id', type: 'text', required: true, key: true },
      { name: 'kind', type: 'select', options: ['chat', 'rerank'], required: true },
      { name: 'provider', type: 'text' },
      { name: 'base_url', type: 'text', required: true },
      { name: 'api_key_env', type: 'text', help: 'the name of an environment variable, never the key' },
      { name: 'model_name', type: 'text', required: true },
      { name: 'context_window', type: 'number' },
      { name: 'max_output_tokens', type: 'number' },
      jsonField('abilities'),
      { name: 'tokenizer', type: 'text' },
      jsonField('extra_args'),
    ],
    list: async () =>
      (await call(api.GET('/v1/admin/models', { params: { query: { limit: 100 } } }))).items.map((m) => ({
        id: m.model_id,
        cells: [m.model_id, m.kind, m.provider, m.model_name, m.api_key_set],
      })),
    get: async (id) => await call(api.GET('/v1/admin/models/{model_id}', { params: { path: { model_id: id } } })),
    create: (body) => call(api.POST('/v1/admin/models', { body: body as Schemas['CreateModelDto'] })),
    replace: (id, body) =>
      call(
        api.PUT('/v1/admin/models/{model_id}', {
          params: { path: { model_id: id } },
          body: body as Schemas['ReplaceModelDto'],
        }),
      ),
    remove: (id) => call(api.DELETE('/v1/admin/models/{model_id}', { params: { path: { model_id: id } } })),
  },
  {
    path: 'tool-sources',
    title: 'Tools',
    singular: 'tool source',
    columns: ['source', 'kind', 'status', 'tools'],
    fields: [
      { name: 'source_id', type: 'text', required: true, key: true },
      { name: 'kind', type: 'select', options: ['mcp_stdio', 'mcp_http', 'http'], required: true },
      jsonField('config', 'one schema per kind (see /docs)'),
      { name: 'enabled', type: 'bool' },
    ],
    list: async () =>
      (await call(api.GET('/v1/admin/tools/sources'))).map((s) => ({
        id: s.source_id,
        cells: [s.source_id, s.kind, s.status, s.tools.join(', ')],
      })),
    get: async (id) =>
      await call(api.GET('/v1/admin/tools/sources/{source_id}', { params: { path: { source_id: id } } })),
    create: (body) => call(api.POST('/v1/admin/tools/sources', { body: body as Schemas['CreateToolSourceDto'] })),
    replace: (id, body) =>
      call(
        api.PUT('/v1/admin/tools/sources/{source_id}', {
          params: { path: { source_id: id } },
          body: body as Schemas['ToolSourceBodyDto'],
        }),
      ),
    remove: (id) => call(api.DELETE('/v1/admin/tools/sources/{source_id}', { params: { path: { source_id: id } } })),
  },
  {
    path: 'knowledge-bases',
    title: 'Knowledge bases',
    singular: 'knowledge base',
    columns: ['knowledge base', 'name', 'documents', 'chunks'],
    fields: [
      { name: 'kb_id', type: 'text', required: true, key: true },
      { name: 'name', type: 'text', required: true },
      { name: 'description', type: 'text' },
      { name: 'chunk_size', type: 'number' },
      { name: 'chunk_overlap', type: 'number' },
    ],
    list: async () =>
      (await call(api.GET('/v1/admin/knowledge-bases', { params: { query: { limit: 100 } } }))).items.map((k) => ({
        id: k.kb_id,
        cells: [k.kb_id, k.name, k.document_count, k.chunk_count],
      })),
    get: async (id) => await call(api.GET('/v1/admin/knowledge-bases/{kb_id}', { params: { path: { kb_id: id } } })),
    create: (body) => call(api.POST('/v1/admin/knowledge-bases', { body: body as Schemas['CreateKnowledgeBaseDto'] })),
    remove: (id) => call(api.DELETE('/v1/admin/knowledge-bases/{kb_id}', { params: { path: { kb_id: id } } })),
  },
  {
    path: 'plugins',
    title: 'Plugins',
    singular: 'plugin',
    columns: ['plugin', 'token prefix', 'token issued'],
    fields: [
      { name: 'author', type: 'text', required: true, key: true },
      { name: 'name', type: 'text', required: true, key: true },
    ],
    list: async () =>
      (await call(api.GET('/v1/admin/plugins'))).map((p) => ({
        id: `${p.author}/${p.name}`,
        cells: [p.plugin_id, `${p.token_prefix}…`, p.token_issued_at],
      })),
    create: (body) => call(api.POST('/v1/admin/plugins', { body: body as Schemas['RegisterPluginDto'] })),
    remove: (id) => {
      const [author, name] = id.split('/');
      return call(api.DELETE('/v1/admin/plugins/{author}/{name}', { params: { path: { author, name } } }));
    },
  },
];

/** `resource_policy.allowed_model_ids[0]` → `resource_policy`: the form field an API error belongs to. */
export function fieldOf(path: string): string {
  return path.split(/[.[]/)[0];
}

function errorsByField(e: CallError, fields: Field[]): { byField: Record<string, string[]>; rest: string[] } {
  const problems = Array.isArray(e.error.details.problems)
    ? (e.error.details.problems as { field?: string; rule?: string }[]).map((p) => ({
        field: p.field ?? '',
        text: `${p.field}: ${p.rule}`,
      }))
    : [{ field: e.field ?? '', text: e.message }];
  const names = new Set(fields.map((f) => f.name));
  const byField: Record<string, string[]> = {};
  const rest: string[] = [];
  for (const p of problems) {
    const f = fieldOf(p.field);
    if (names.has(f)) {
      (byField[f] ??= []).push(p.text);
    } else {
      rest.push(p.text);
    }
  }
  return { byField, rest };
}

function initial(fields: Field[], item: Json | null): Record<string, string> {
  const out: Record<string, string> = {};
  for (const f of fields) {
    const v = item?.[f.name];
    out[f.name] =
      v === undefined || v === null
        ? f.type === 'bool'
          ? 'true'
          : ''
        : f.type === 'json'
          ? JSON.stringify(v, null, 2)
          : str(v);
  }
  return out;
}

/** The form's values as a body; a field whose JSON does not parse is a problem of that field. */
function bodyOf(
  fields: Field[],
  values: Record<string, string>,
  creating: boolean,
): { body: Json; problems: Record<string, string[]> } {
  const body: Json = {};
  const problems: Record<string, string[]> = {};
  for (const f of fields) {
    if (f.key && !creating) {
      continue;
    }
    const raw = values[f.name].trim();
    if (raw === '') {
      continue;
    }
    if (f.type === 'json') {
      try {
        body[f.name] = JSON.parse(raw);
      } catch {
        problems[f.name] = [`${f.name}: not valid JSON`];
      }
    } else if (f.type === 'number') {
      body[f.name] = Number(raw);
    } else if (f.type === 'bool') {
      body[f.name] = raw === 'true';
    } else {
      body[f.name] = raw;
    }
  }
  return { body, problems };
}

function Editor({
  kind,
  item,
  id,
  onSaved,
}: {
  kind: ResourceKind;
  item: Json | null;
  id: string | null;
  /** After a replace: the page reloads the item (its new version) and shows the note. */
  onSaved?: (note: string) => void;
}) {
  const creating = id === null;
  const [values, setValues] = useState(() => initial(kind.fields, item));
  const [errors, setErrors] = useState<Record<string, string[]>>({});
  const [general, setGeneral] = useState<string[]>([]);
  const [note, setNote] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const submit = async (e: Event) => {
    e.preventDefault();
    setNote(null);
    const { body, problems } = bodyOf(kind.fields, values, creating);
    if (Object.keys(problems).length) {
      setErrors(problems);
      setGeneral([]);
      return;
    }
    setBusy(true);
    const r = await run(() => (creating ? kind.create!(body) : kind.replace!(id, body, item ?? {})));
    setBusy(false);
    if (r.ok) {
      setErrors({});
      setGeneral([]);
      const created = r.value as { token?: string } | undefined;
      const saved = created?.token ? `Saved. The plugin token, shown once: ${created.token}` : 'Saved.';
      if (onSaved) {
        onSaved(saved);
        return;
      }
      setNote(saved);
      if (creating && !created?.token) {
        const newId = kind.fields
          .filter((f) => f.key)
          .map((f) => values[f.name].trim())
          .join('/');
        if (kind.get) {
          navigate(`/${kind.path}/${encodeURIComponent(newId)}`);
        }
      }
    } else {
      const { byField, rest } = errorsByField(r.error, kind.fields);
      setErrors(byField);
      setGeneral(rest.length || Object.keys(byField).length ? rest : [r.error.message]);
      // Focus the first field at fault.
      const first = kind.fields.find((f) => byField[f.name]);
      if (first) {
        document.getElementById(`f-${first.name}`)?.focus();
      }
    }
  };
  return (
    <form class="editor" onSubmit={(e) => void submit(e)} noValidate>
      {general.length > 0 && (
        <div class="state error" role="alert">
          {general.map((g) => (
            <p class="wrap" key={g}>
              {g}
            </p>
          ))}
        </div>
      )}
      {note && (
        <p role="status" class="wrap">
          {note}
        </p>
      )}
      {kind.fields.map((f) => {
        const err = errors[f.name];
        const readOnly = f.key && !creating;
        const common = {
          id: `f-${f.name}`,
          name: f.name,
          'aria-invalid': err ? ('true' as const) : undefined,
          'aria-describedby':
            [err ? `e-${f.name}` : '', f.help ? `h-${f.name}` : ''].filter(Boolean).join(' ') || undefined,
          readOnly,
          required: f.required,
        };
        const set = (v: string) => setValues((s) => ({ ...s, [f.name]: v }));
        return (
          <div class={`field ${err ? 'invalid' : ''}`} key={f.name} data-field={f.name}>
            <label for={common.id}>
              {f.name}
              {f.required && <span aria-hidden="true"> *</span>}
            </label>
            {f.type === 'json' ? (
              <textarea
                {...common}
                rows={Math.min(14, Math.max(3, values[f.name].split('\n').length))}
                spellcheck={false}
                value={values[f.name]}
                onInput={(e) => set(e.currentTarget.value)}
              />
            ) : f.type === 'select' ? (
              <select
                {...common}
                value={values[f.name]}
                onChange={(e) => set(e.currentTarget.value)}
                disabled={readOnly}
              >
                <option value="">—</option>
                {f.options!.map((o) => (
                  <option key={o}>{o}</option>
                ))}
              </select>
            ) : f.type === 'bool' ? (
              <select {...common} value={values[f.name]} onChange={(e) => set(e.currentTarget.value)}>
                <option value="true">true</option>
                <option value="false">false</option>
              </select>
            ) : f.type === 'number' ? (
              <input {...common} type="number" value={values[f.name]} onInput={(e) => set(e.currentTarget.value)} />
            ) : (
              <input {...common} type="text" value={values[f.name]} onInput={(e) => set(e.currentTarget.value)} />
            )}
            {f.help && (
              <small id={`h-${f.name}`} class="muted">
                {f.help}
              </small>
            )}
            {err && (
              <p id={`e-${f.name}`} class="field-error wrap" data-testid={`error-${f.name}`}>
                {err.join('; ')}
              </p>
            )}
          </div>
        );
      })}
      <button type="submit" disabled={busy}>
        {creating ? `Create ${kind.singular}` : 'Save'}
      </button>
    </form>
  );
}

export function Resources({ kind }: { kind: ResourceKind }) {
  const list = useLoad(kind.list, [kind.path]);
  const [creating, setCreating] = useState(false);
  const [note, setNote] = useState<string | null>(null);
  return (
    <Page
      title={kind.title}
      actions={
        kind.create && (
          <button type="button" onClick={() => setCreating(!creating)} aria-expanded={creating}>
            {creating ? 'Close the form' : `New ${kind.singular}`}
          </button>
        )
      }
    >
      {creating && (
        <section aria-label={`New ${kind.singular}`} class="card">
          <Editor kind={kind} item={null} id={null} />
        </section>
      )}
      {note && <p role="status">{note}</p>}
      {kind.path === 'tool-sources' && <BuiltinTools />}
      <Section loaded={list}>
        {(rows) =>
          rows.length === 0 ? (
            <Empty>No {kind.singular} yet.</Empty>
          ) : (
            <Table caption={kind.title} head={[...kind.columns, '']}>
              {rows.map((r) => (
                <tr key={r.id}>
                  {r.cells.map((c, i) => (
                    <td class="wrap" key={i}>
                      {i === 0 && kind.get ? (
                        <Link to={`/${kind.path}/${encodeURIComponent(r.id)}`}>{String(c)}</Link>
                      ) : c === null ? (
                        '—'
                      ) : (
                        String(c)
                      )}
                    </td>
                  ))}
                  <td>
                    {kind.remove && (
                      <button
                        type="button"
                        class="danger small"
                        aria-label={`Delete ${kind.singular} ${r.id}`}
                        onClick={() => {
                          if (confirm(`Delete ${kind.singular} ${r.id}?`)) {
                            void run(() => kind.remove!(r.id)).then((x) => {
                              setNote(x.ok ? `Deleted ${r.id}.` : `Not deleted: ${x.error.message}`);
                              list.reload();
                            });
                          }
                        }}
                      >
                        Delete
                      </button>
                    )}
                  </td>
                </tr>
              ))}
            </Table>
          )
        }
      </Section>
    </Page>
  );
}

function BuiltinTools() {
  const tools = useLoad(() => call(api.GET('/v1/admin/tools')), []);
  return (
    <section aria-labelledby="h-all-tools">
      <h2 id="h-all-tools">Every tool</h2>
      <Section loaded={tools}>
        {(list) =>
          list.length === 0 ? (
            <Empty>No tool.</Empty>
          ) : (
            <Table caption="Tools" head={['tool', 'source', 'enabled', '']}>
              {list.map((t) => (
                <tr key={t.tool_name}>
                  <td class="wrap">
                    <code>{t.tool_name}</code>
                    <br />
                    <span class="muted">{t.description}</span>
                  </td>
                  <td>{t.source_id ?? t.source}</td>
                  <td>
                    <Status value={t.enabled ? 'enabled' : 'disabled'} />
                  </td>
                  <td>
                    {t.source === 'builtin' && (
                      <button
                        type="button"
                        class="small"
                        onClick={() =>
                          void run(() =>
                            call(
                              api.PUT('/v1/admin/tools/builtins/{name}', {
                                params: { path: { name: t.tool_name } },
                                body: { enabled: !t.enabled },
                              }),
                            ),
                          ).then(() => tools.reload())
                        }
                      >
                        {t.enabled ? 'Switch off' : 'Switch on'}
                      </button>
                    )}
                  </td>
                </tr>
              ))}
            </Table>
          )
        }
      </Section>
    </section>
  );
}

export function ResourcePage({ kind, id }: { kind: ResourceKind; id: string }) {
  const item = useLoad(() => (kind.get ? kind.get(id) : Promise.reject(new Error('not readable'))), [kind.path, id]);
  const [note, setNote] = useState<string | null>(null);
  return (
    <Page
      title={`${kind.singular} ${id}`}
      actions={
        <Link to={`/${kind.path}`} class="button">
          All {kind.title.toLowerCase()}
        </Link>
      }
    >
      {note && (
        <p role="status" class="wrap">
          {note}
        </p>
      )}
      {item.error ? (
        <ErrorState error={item.error} onRetry={item.reload} />
      ) : (
        <Section loaded={item}>
          {(data) =>
            kind.replace ? (
              <Editor
                kind={kind}
                item={data}
                id={id}
                key={JSON.stringify(data)}
                onSaved={(n) => {
                  setNote(n);
                  item.reload();
                }}
              />
            ) : (
              <pre class="json">{JSON.stringify(data, null, 2)}</pre>
            )
          }
        </Section>
      )}
    </Page>
  );
}
