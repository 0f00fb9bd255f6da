import { ScriptedOpenAIServer } from '@libs/testing';

/*
 * The provider of the bench, in its own process: the scripted OpenAI-compatible server on
 * SCRIPTED_PORT, every chat completion streamed as SCRIPTED_CHUNKS content deltas of
 * SCRIPTED_DELTA, then the finish chunk, the usage chunk and [DONE].
 */

async function main(): Promise<void> {
  const chunks = Number(process.env.SCRIPTED_CHUNKS ?? 200);
  const delta = process.env.SCRIPTED_DELTA ?? 'tok ';
  const server = await ScriptedOpenAIServer.start(Number(process.env.SCRIPTED_PORT ?? 0));
  server.defaultCompletion = {
    deltas: Array.from({ length: chunks }, () => delta),
    usage: { prompt_tokens: 12, completion_tokens: chunks, total_tokens: 12 + chunks },
  };
  // Recording every request would grow without bound over a bench run.
  setInterval(() => server.requests.splice(0), 1000).unref();
  process.stdout.write(`scripted server listening on ${server.url}\n`);
  process.on('SIGTERM', () => {
    void server.close().then(() => process.exit(0));
  });
}

void main();
