import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { LOADER_OPTIONS, protoPath, type HostMessage, type PluginMessage } from '@libs/proto';

// The host decodes with proto-loader at run time while the code is typed by ts-proto. This test
// pushes messages through the real wire codec (serialize → bytes → deserialize) and checks that
// what comes out has exactly the shapes the generated types promise: Struct as plain JSON,
// int64 as number, optional scalars absent when unset, the oneof discriminator present.
describe('proto round trip through the wire codec', () => {
  const def = protoLoader.loadSync(protoPath(), LOADER_OPTIONS);
  const pkg = grpc.loadPackageDefinition(def) as unknown as {
    runnerhost: { v1: { RunnerGatewayService: grpc.ServiceClientConstructor } };
  };
  const connect = pkg.runnerhost.v1.RunnerGatewayService.service.Connect;

  it('keeps Struct values as JSON, int64 as numbers and optional fields absent', () => {
    const msg: PluginMessage = {
      result: {
        run_id: 'r1',
        type: 'message.delta',
        data: { chunk: { role: 'assistant', content: 'hi', n: 1.5, ok: true, nil: null, list: [1, 'a', { b: [] }] } },
        usage: undefined,
        sequence: 9007199254740000,
        timestamp: undefined,
      },
    };
    const bytes = connect.requestSerialize(msg);
    const back = connect.requestDeserialize(bytes) as PluginMessage & { msg: string };
    expect(back.msg).toBe('result');
    expect(back.result?.data).toEqual(msg.result?.data);
    expect(back.result?.sequence).toBe(9007199254740000);
    expect(back.result).not.toHaveProperty('timestamp');
    expect(back.result?.usage).toBeNull();
  });

  it('keeps a JSON key named __proto__ as an own key both ways (a plain assignment would set the prototype)', () => {
    // JSON.parse makes `__proto__` an own key, as a platform's or a runner's JSON does.
    const data = JSON.parse(
      '{"__proto__": {"x": 1}, "constructor": "c", "nested": {"__proto__": [1, {"__proto__": null}]}}',
    );
    const msg: PluginMessage = {
      result: { run_id: 'r1', type: 'state.updated', data, usage: undefined, sequence: 1, timestamp: undefined },
    };
    const bytes = connect.requestSerialize(msg);
    const back = connect.requestDeserialize(bytes) as PluginMessage;
    const out = back.result?.data as Record<string, unknown>;
    expect(Object.keys(out)).toEqual(['__proto__', 'constructor', 'nested']);
    expect(Object.getPrototypeOf(out)).toBe(Object.prototype);
    expect(JSON.stringify(out)).toBe(JSON.stringify(data));
    // Encoded bytes carry the key: the same message without it is shorter.
    const without = JSON.parse('{"constructor": "c", "nested": {"__proto__": [1, {"__proto__": null}]}}');
    expect(bytes.length).toBeGreaterThan(
      connect.requestSerialize({ result: { ...msg.result!, data: without } }).length,
    );
  });

  it('carries a run request with its nested context', () => {
    const msg: HostMessage = {
      run: {
        runner_id: 'plugin:a/b/default',
        runner_name: 'default',
        traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01',
        context: {
          run_id: 'r1',
          trigger: { type: 'message.received', source: 'api', timestamp: 1700000000 },
          event: undefined,
          conversation: undefined,
          actor: undefined,
          subject: undefined,
          input: { text: 'hello', contents: [], attachments: [], interaction: undefined },
          delivery: undefined,
          resources: undefined,
          context: undefined,
          state: undefined,
          runtime: {
            host: 'runner-host',
            protocol_version: '1',
            trace_id: 't',
            deadline_at: 1700000300.5,
            metadata: { model_context_window_tokens: null },
          },
          config: { timeout: 300, nested: { a: [true] } },
          metadata: {},
        },
      },
    };
    const back = connect.responseDeserialize(connect.responseSerialize(msg)) as HostMessage & { msg: string };
    expect(back.msg).toBe('run');
    expect(back.run?.context?.config).toEqual({ timeout: 300, nested: { a: [true] } });
    expect(back.run?.context?.runtime?.deadline_at).toBe(1700000300.5);
    expect(back.run?.context?.trigger?.timestamp).toBe(1700000000);
    expect(back.run?.context?.input?.text).toBe('hello');
    expect(back.run?.context?.conversation).toBeNull();
  });
});
