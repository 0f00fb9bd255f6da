import * as grpc from '@grpc/grpc-js';
import { serveForParent } from '../common/port-handshake';
import { loadHostApiService } from '../dispatch/raw-runner/host-api';
import { toStruct, toValue, type Json, type JsonObject } from '../dispatch/raw-runner/struct';

/*
 * Child process of the bench: a bare grpc-js server of runnerhost.v1.HostApiService (same proto,
 * same loader options as the host and the demo runner) for the floors. No auth, no guard, no audit,
 * no database:
 *   RunGet      → a tiny constant answer (the bare unary round trip);
 *   StateGet    → the answer the host gave the runner, decoded and re-encoded (env BENCH_CANNED);
 *   HistoryPage → likewise.
 * Prints the bound port on stdout and exits when its stdin closes or on SIGTERM.
 */

interface Canned {
  state_get?: { value: Json };
  history_page?: { items: JsonObject[]; has_more: boolean; next_cursor: string | null; prev_cursor: string | null };
}

const canned = JSON.parse(process.env.BENCH_CANNED ?? '{}') as Canned;
const stateGet = { value: canned.state_get ? toValue(canned.state_get.value) : null };
const historyPage = canned.history_page
  ? {
      items: canned.history_page.items.map((item) => toStruct(item)),
      has_more: canned.history_page.has_more,
      next_cursor: canned.history_page.next_cursor ?? undefined,
      prev_cursor: canned.history_page.prev_cursor ?? undefined,
    }
  : { items: [], has_more: false };

type Unary = grpc.handleUnaryCall<{ run_id: string }, unknown>;
const answer =
  (response: (req: { run_id: string }) => unknown): Unary =>
  (call, callback) =>
    callback(null, response(call.request));

const server = new grpc.Server();
server.addService(loadHostApiService().service, {
  RunGet: answer((req) => ({ run_id: req.run_id, status: 'running', cancel_requested: false })),
  StateGet: answer(() => stateGet),
  HistoryPage: answer(() => historyPage),
});

serveForParent(server, 'bare-host-api-server');
