import { useEffect, useState } from 'preact/hooks';
import { api, call, CallError } from '../api/client';
import { EMPTY_TIMELINE, fold, RESULT_TYPES, type RunResult, type Timeline } from './timeline';

export type StreamState = 'connecting' | 'live' | 'ended' | 'error';

/**
 * Follows a run's result stream with EventSource and a stream token (`EventSource` cannot send the
 * key): replays then follows, folding each result into the timeline. A refused or expired token
 * is minted again and the stream resumed with `&after=<last id>`; the host answers 204 once the run
 * ended, which closes the EventSource for good.
 */
export function useRunStream(runId: string): { timeline: Timeline; state: StreamState; error: string | null } {
  const [timeline, setTimeline] = useState<Timeline>(EMPTY_TIMELINE);
  const [state, setState] = useState<StreamState>('connecting');
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    let closed = false;
    let source: EventSource | null = null;
    let last = 0;
    let ended = false;
    let reopenings = 0;
    setTimeline(EMPTY_TIMELINE);
    setState('connecting');
    setError(null);
    const open = async () => {
      let url: string;
      try {
        const token = await call(api.POST('/v1/runs/{run_id}/stream-tokens', { params: { path: { run_id: runId } } }));
        url = token.events_url + (last > 0 ? `&after=${last}` : '');
      } catch (e) {
        if (!closed) {
          setState('error');
          setError(e instanceof CallError ? e.message : String(e));
        }
        return;
      }
      if (closed) {
        return;
      }
      const es = new EventSource(url);
      source = es;
      es.onopen = () => setState(ended ? 'ended' : 'live');
      for (const type of RESULT_TYPES) {
        es.addEventListener(type, (e) => {
          const r = JSON.parse((e as MessageEvent<string>).data) as RunResult;
          last = Math.max(last, r.sequence);
          if (r.type === 'run.completed' || r.type === 'run.failed') {
            ended = true;
          }
          setTimeline((t) => fold(t, r));
        });
      }
      es.onerror = () => {
        if (ended) {
          es.close();
          setState('ended');
          return;
        }
        if (es.readyState === EventSource.CLOSED) {
          // 204 (the run ended with nothing more to send), or the token was refused: a run that
          // still goes on is resumed with a fresh token.
          void call(api.GET('/v1/runs/{run_id}', { params: { path: { run_id: runId } } })).then(
            (run) => {
              if (closed) {
                return;
              }
              if (run.status !== 'running' && run.status !== 'queued') {
                ended = true;
                setState('ended');
              } else if (reopenings++ < 5) {
                void open();
              } else {
                setState('error');
                setError('the stream closed and could not be resumed');
              }
            },
            (e: unknown) => {
              setState('error');
              setError(e instanceof Error ? e.message : String(e));
            },
          );
        }
      };
    };
    void open();
    return () => {
      closed = true;
      source?.close();
    };
  }, [runId]);
  return { timeline, state, error };
}
