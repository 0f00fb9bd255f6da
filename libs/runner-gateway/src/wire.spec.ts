import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { z } from 'zod';
import { LOADER_OPTIONS, protoPath, type HostMessage, type PluginMessage } from '@libs/proto';
import { runContextSchema, runnerResultSchema, type RunContext } from '@libs/protocol';
import { runContextFixture } from '@libs/testing';
import { fromWireResult, toHostMessage } from './wire';

const def = protoLoader.loadSync(protoPath(), LOADER_OPTIONS);
const pkg = grpc.loadPackageDefinition(def) as unknown as {
  runnerhost: { v1: { RunnerGatewayService: grpc.ServiceClientConstructor } };
};
const connect = pkg.runnerhost.v1.RunnerGatewayService.service.Connect;

interface FieldDescriptor {
  name: string;
  type: string;
  typeName: string;
}
function fieldsOf(typeName: string): FieldDescriptor[] {
  const name = typeName.replace(/^\./, '');
  const entry = (def[name] ?? def[`runnerhost.v1.${name}`]) as { type?: { field: FieldDescriptor[] } } | undefined;
  if (!entry?.type) {
    throw new Error(`no message ${typeName} in the proto files`);
  }
  return entry.type.field;
}

/** Optional, nullable and array wrappers off a schema: what one element of the field is. */
function element(schema: z.ZodType): z.ZodType {
  if (schema instanceof z.ZodOptional || schema instanceof z.ZodNullable) {
    return element(schema.unwrap() as z.ZodType);
  }
  if (schema instanceof z.ZodArray) {
    return element(schema.element as z.ZodType);
  }
  return schema;
}

/** Every field of the proto message has a schema field of the same name, and no more; message fields recursively. */
function mismatches(typeName: string, schema: z.ZodType, at: string): string[] {
  const shape = (element(schema) as z.ZodObject).shape as Record<string, z.ZodType>;
  const fields = fieldsOf(typeName);
  const protoNames = fields.map((f) => f.name).sort();
  const schemaNames = Object.keys(shape).sort();
  const out: string[] = [];
  if (JSON.stringify(protoNames) !== JSON.stringify(schemaNames)) {
    out.push(`${at}: proto [${protoNames.join(', ')}] vs schema [${schemaNames.join(', ')}]`);
  }
  for (const f of fields) {
    if (f.type === 'TYPE_MESSAGE' && !f.typeName.endsWith('google.protobuf.Struct') && shape[f.name]) {
      out.push(...mismatches(f.typeName, shape[f.name], `${at}.${f.name}`));
    }
  }
  return out;
}

const context: RunContext = runContextFixture();

/** The wire decoder sets unset message fields to null; a runner reads them as absent. */
function withoutNulls(value: unknown): unknown {
  if (Array.isArray(value)) {
    return value.map(withoutNulls);
  }
  if (typeof value === 'object' && value !== null) {
    return Object.fromEntries(
      Object.entries(value)
        .filter(([, v]) => v !== null)
        .map(([k, v]) => [k, withoutNulls(v)]),
    );
  }
  return value;
}

describe('the Connect edge conversions', () => {
  it('keeps the run-context schema field for field with context.proto', () => {
    expect(mismatches('runnerhost.v1.RunContext', runContextSchema, 'context')).toEqual([]);
  });

  it('keeps the runner-result schema field for field with RunResult', () => {
    expect(mismatches('runnerhost.v1.RunResult', runnerResultSchema, 'result')).toEqual([]);
  });

  it('sends a run whose context a runner decodes as the host built it', () => {
    const msg = toHostMessage({ run: { runner_id: 'plugin:a/b/c', runner_name: 'c', context, traceparent: '' } });
    const back = connect.responseDeserialize(connect.responseSerialize(msg)) as HostMessage & { msg: string };
    expect(back.msg).toBe('run');
    expect(back.run?.runner_id).toBe('plugin:a/b/c');
    expect(runContextSchema.parse(withoutNulls(back.run?.context))).toEqual(context);
    expect(back.run?.context?.runtime?.deadline_at).toBe(1_700_000_300.5);
    expect(back.run?.context?.context?.event_seq).toBe(8);
  });

  it('sends a cancel as a cancel message only', () => {
    expect(toHostMessage({ cancel: { run_id: 'r1', reason: 'deadline' } })).toEqual({
      cancel: { run_id: 'r1', reason: 'deadline' },
    });
  });

  it('takes a result off the wire with unset fields absent, never null', () => {
    const msg: PluginMessage = {
      result: { run_id: 'r1', type: 'message.delta', data: { chunk: { content: 'x' } }, sequence: 3 },
    };
    const wire = (connect.requestDeserialize(connect.requestSerialize(msg)) as PluginMessage).result!;
    const result = fromWireResult(wire);
    expect(result).toEqual({
      run_id: 'r1',
      type: 'message.delta',
      data: { chunk: { content: 'x' } },
      usage: undefined,
      sequence: 3,
      timestamp: undefined,
    });
    expect(runnerResultSchema.safeParse(result).success).toBe(true);
  });
});
