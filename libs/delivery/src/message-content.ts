/** What the normaliser reads of a message's `content` (Runner Protocol v1 content elements). */

/** Text of a message `content`: a string, or the text elements of a content list. */
export function textOf(content: unknown): string {
  if (typeof content === 'string') {
    return content;
  }
  if (Array.isArray(content)) {
    return content
      .map((e: unknown) => {
        const el = e as { type?: unknown; text?: unknown } | null;
        return el?.type === 'text' && typeof el.text === 'string' ? el.text : '';
      })
      .join('');
  }
  return '';
}

/** Images and files of a message's content list, as attachments. */
export function attachmentsOf(content: unknown): Record<string, unknown>[] {
  if (!Array.isArray(content)) {
    return [];
  }
  const out: Record<string, unknown>[] = [];
  for (const e of content as Record<string, unknown>[]) {
    const name = typeof e?.file_name === 'string' ? { name: e.file_name } : {};
    switch (e?.type) {
      case 'image_url': {
        const url = (e.image_url as { url?: unknown } | undefined)?.url;
        if (typeof url === 'string') {
          out.push({ type: 'image', url, ...name });
        }
        break;
      }
      case 'image_base64':
        if (typeof e.image_base64 === 'string') {
          out.push({ type: 'image', base64: e.image_base64, ...name });
        }
        break;
      case 'file_url':
        if (typeof e.file_url === 'string') {
          out.push({ type: 'file', url: e.file_url, ...name });
        }
        break;
      case 'file_base64':
        if (typeof e.file_base64 === 'string') {
          out.push({ type: 'file', base64: e.file_base64, ...name });
        }
        break;
    }
  }
  return out;
}
