import { bodyChunks } from './body-chunks';

function streamOf(parts: string[], onCancel: () => void): ReadableStream<Uint8Array> {
  const encoder = new TextEncoder();
  let i = 0;
  return new ReadableStream<Uint8Array>({
    pull(controller) {
      if (i < parts.length) {
        controller.enqueue(encoder.encode(parts[i++]));
      } else {
        controller.close();
      }
    },
    cancel: onCancel,
  });
}

describe('bodyChunks', () => {
  it('yields every chunk in order and releases the body', async () => {
    const cancel = jest.fn();
    const body = streamOf(['a', 'bc', 'd'], cancel);
    const decoder = new TextDecoder();
    const got: string[] = [];
    for await (const chunk of bodyChunks(body)) {
      got.push(decoder.decode(chunk));
    }
    expect(got).toEqual(['a', 'bc', 'd']);
    expect(cancel).not.toHaveBeenCalled();
    expect(body.locked).toBe(false);
  });

  it('cancels the body when the consumer stops early', async () => {
    const cancel = jest.fn();
    const body = streamOf(['a', 'b', 'c'], cancel);
    for await (const chunk of bodyChunks(body)) {
      expect(chunk.length).toBe(1);
      break;
    }
    expect(cancel).toHaveBeenCalledTimes(1);
    expect(body.locked).toBe(false);
  });
});
