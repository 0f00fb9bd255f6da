import { defineRunner, messageText, serve } from '@runner-host/runner-sdk';

/**
 * Streams a model's answer through the host, after asking the host's `current_time` tool;
 * answers follow-ups steered into the run; stops when the run is cancelled (the SDK aborts its
 * host calls and reports the cancel).
 */
export const assistant = defineRunner({
  name: 'default',
  label: { en_US: 'Assistant (SDK example)' },
  capabilities: { streaming: true, tool_calling: true, steering: true, interrupt: true },
  permissions: { models: ['invoke', 'stream'], tools: ['detail', 'call'] },
  configSchema: [{ type: 'integer', name: 'steer_wait_ms', default: 1000 }],
  async run(ctx, io) {
    const model = ctx.resources?.models[0]?.model_id;
    if (!model) {
      return io.failed('no model granted to this agent', { code: 'runner.no_model' });
    }
    const time = await io.toolCall('current_time');
    for await (const turn of io.turns({ waitMs: Number(ctx.config.steer_wait_ms ?? 1000) })) {
      const answer = io.host.models.stream(model, [
        { role: 'system', content: `Current time: ${JSON.stringify(time)}` },
        { role: 'user', content: turn.text },
      ]);
      for await (const chunk of answer) {
        await io.delta(messageText(chunk));
      }
      await io.message(answer.text);
    }
  },
});

if (require.main === module) {
  void serve([assistant]); // RUNNERHOST_GRPC_URL, RUNNERHOST_PLUGIN_TOKEN, _AUTHOR, _NAME
}
