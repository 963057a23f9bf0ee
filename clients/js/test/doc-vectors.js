// The known-answer vectors of docs/protocol.md ("Known-answer vectors"), read from the doc.
import { readFileSync } from 'node:fs';

export function docVectors() {
  const doc = readFileSync(new URL('../../../docs/protocol.md', import.meta.url), 'utf8');
  const at = doc.indexOf('### Known-answer vectors');
  const start = doc.indexOf('```json\n', at) + '```json\n'.length;
  return JSON.parse(doc.slice(start, doc.indexOf('\n```', start)));
}
