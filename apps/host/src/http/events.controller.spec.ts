import type { FastifyReply } from 'fastify';
import type { AuthenticatedRequest } from '@libs/auth';
import type { AdmissionService, EventSubmission, InteractionsService, WorkspaceAdmission } from '@libs/runs';
import { EventsController } from './events.controller';
import type { SseStreams } from './sse-streams';
import type { WriteTenancy } from './tenancy';

const submission = {
  agent_id: 'a1',
  event: { event_type: 'message.received', source: 'api' },
  input: { text: 'hi' },
} as unknown as EventSubmission;

/**
 * The admission stands in for one that dispatched a run: like node:http2, whose write of the
 * dispatch frame is sent from an immediate of the same turn, it queues an immediate ('frame').
 */
function controllerWith(disposition: 'started' | 'queued', replayed = false) {
  const order: string[] = [];
  const admission = {
    submit: () => {
      setImmediate(() => order.push('frame'));
      return Promise.resolve({ event_id: 'e1', run_id: 'r1', disposition, replayed });
    },
  } as unknown as AdmissionService;
  const tenancy = {
    derive: (body: EventSubmission) => Promise.resolve({ submission: body, agent: undefined }),
  } as unknown as WorkspaceAdmission;
  const controller = new EventsController(
    admission,
    {} as SseStreams,
    {} as InteractionsService,
    tenancy,
    {} as WriteTenancy,
  );
  const res = {
    status: () => res,
    header: () => res,
    send: (body: unknown) => {
      order.push(`answer ${JSON.stringify(body)}`);
      return Promise.resolve();
    },
  };
  const req = { principal: { workspaces: null }, headers: {} } as unknown as AuthenticatedRequest;
  const submit = () => controller.submit(submission, undefined, undefined, req, res as unknown as FastifyReply);
  return { order, submit };
}

describe('EventsController.submit', () => {
  it("answers a started run only after what this turn's immediates send (the run's dispatch frame)", async () => {
    const { order, submit } = controllerWith('started');
    await submit();
    expect(order).toEqual(['frame', 'answer {"event_id":"e1","disposition":"started","run_id":"r1"}']);
  });

  it('answers a run that did not start here (queued) and a replay without waiting for a turn', async () => {
    for (const [disposition, replayed] of [
      ['queued', false],
      ['started', true],
    ] as const) {
      const { order, submit } = controllerWith(disposition, replayed);
      await submit();
      expect(order[0]).toMatch(/^answer /);
    }
  });
});
