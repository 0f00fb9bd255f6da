/**
 * The chunks of a fetch response body, read through its reader (the typed API: the ES2022 lib
 * this repository compiles against does not declare ReadableStream as async-iterable). Like
 * `for await` over the stream itself, a consumer that stops early cancels the body.
 */
export async function* bodyChunks(body: ReadableStream<Uint8Array>): AsyncGenerator<Uint8Array> {
  const reader = body.getReader();
  let done = false;
  try {
    for (;;) {
      const next = await reader.read();
      if (next.done) {
        done = true;
        return;
      }
      yield next.value;
    }
  } finally {
    if (!done) {
      await reader.cancel().catch(() => undefined);
    }
    reader.releaseLock();
  }
}
