import { SseParser, type SseEvent } from './sse';

function parseIn(chunks: string[]): SseEvent[] {
  const parser = new SseParser();
  return chunks.flatMap((c) => parser.push(c));
}

/** Every way of cutting `text` in two, plus one chunk per character. */
function chunkings(text: string): string[][] {
  const out: string[][] = [[text], [...text]];
  for (let i = 1; i < text.length; i++) {
    out.push([text.slice(0, i), text.slice(i)]);
  }
  return out;
}

const STREAM =
  ': a comment\n' +
  'id: 1\nevent: message.delta\ndata: {"a":1}\n\n' +
  'id: 2\r\nevent: message.delta\r\ndata: first\r\ndata:second\r\n\r\n' +
  'event: no-data\n\n' +
  'id: 3\r\nevent: run.completed\ndata\r\n\n' +
  'data:  two spaces\n\n';

const EXPECTED: SseEvent[] = [
  { id: '1', event: 'message.delta', data: '{"a":1}' },
  { id: '2', event: 'message.delta', data: 'first\nsecond' },
  { id: '3', event: 'run.completed', data: '' },
  { id: null, event: 'message', data: ' two spaces' },
];

describe('SseParser', () => {
  it('reads events with LF and CRLF line ends (mixed too), comments and multi-line data', () => {
    expect(parseIn([STREAM])).toEqual(EXPECTED);
  });

  it('gives the same events however the stream is cut into chunks (a CRLF cut between chunks too)', () => {
    for (const chunks of chunkings(STREAM)) {
      expect(parseIn(chunks)).toEqual(EXPECTED);
    }
  });

  it('holds an event whose blank line has not arrived yet', () => {
    const parser = new SseParser();
    expect(parser.push('id: 7\ndata: x\n')).toEqual([]);
    expect(parser.push('\n')).toEqual([{ id: '7', event: 'message', data: 'x' }]);
  });

  it('does not carry an id or event name into the next event', () => {
    expect(parseIn(['id: 1\nevent: e\ndata: a\n\ndata: b\n\n'])).toEqual([
      { id: '1', event: 'e', data: 'a' },
      { id: null, event: 'message', data: 'b' },
    ]);
  });

  it('reads a long replay in one chunk (200 events)', () => {
    let text = '';
    for (let i = 1; i <= 200; i++) {
      text += `id: ${i}\nevent: message.delta\ndata: {"seq":${i}}\n\n`;
    }
    const events = parseIn([text]);
    expect(events).toHaveLength(200);
    expect(events[199]).toEqual({ id: '200', event: 'message.delta', data: '{"seq":200}' });
  });
});
