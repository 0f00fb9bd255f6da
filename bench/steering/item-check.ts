/*
 * Host CPU per pulled steering item of typing it on the way out of SteeringService.pull: the cheap
 * shape check the service uses (`steeringItemsOf`) against a full parse by the protocol schema
 * (`steeringItemSchema`), in process, alternated. `node dist/bench/steering/item-check.js`
 * (after `npm run build`); docs/benchmarks.md#steering.
 */
import { steeringItemSchema, steeringItemsOf } from '../../libs/protocol/src';

const item = (n: number) => ({
  item_id: `e${n}`,
  claimed_run_id: 'run-1',
  runner_id: 'plugin:acme/echo/default',
  claimed_at: 1_700_000_000,
  position: n,
  event: { event_id: `e${n}`, event_type: 'message.received', source: 'api', data: { channel: 'c1', user: 'u1' } },
  conversation: { conversation_id: 'conv-1', thread_id: 't1' },
  actor: { actor_type: 'user', actor_id: 'u1', actor_name: 'Ann' },
  subject: null,
  input: { text: 'and one more thing about the report', contents: [{ type: 'text', text: 'x' }] },
  traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01',
});

// A pull of 10 items as they come out of the stored JSON.
const batch: unknown[] = Array.from({ length: 10 }, (_, i) => JSON.parse(JSON.stringify(item(i))) as unknown);
const N = 20_000;

function perItemUs(f: () => unknown): number {
  const t = process.cpuUsage();
  for (let i = 0; i < N; i++) {
    f();
  }
  const d = process.cpuUsage(t);
  return (d.user + d.system) / N / batch.length;
}

const cheap = () => steeringItemsOf(batch);
const full = () => steeringItemSchema.array().parse(batch);
perItemUs(cheap);
perItemUs(full);
for (let r = 0; r < 5; r++) {
  console.log(
    `round ${r}: shape check ${perItemUs(cheap).toFixed(3)} µs/item, full schema parse ${perItemUs(full).toFixed(3)} µs/item`,
  );
}
