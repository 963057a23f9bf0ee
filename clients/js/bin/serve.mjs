// A static file server on 127.0.0.1 for the browser pages (ES modules do not load from file://):
// it serves src/, browser/, example/ and the browser builds of the two libraries, nothing else.
import { createServer } from 'node:http';
import { readFile } from 'node:fs/promises';
import { extname, join, normalize, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const ALLOWED = ['src/', 'browser/', 'example/', 'node_modules/libsodium-wrappers/dist/modules-esm/',
  'node_modules/libsodium/dist/modules-esm/', 'node_modules/mqtt/dist/'];
const TYPES = { '.js': 'text/javascript', '.mjs': 'text/javascript', '.html': 'text/html',
  '.json': 'application/json', '.css': 'text/css', '.png': 'image/png' };

/** Starts the server; resolves with {server, origin}. ``extra`` maps a path to bytes served
 * as JSON (the example page's manifest). */
export async function serve(extra = {}) {
  const server = createServer(async (request, response) => {
    const path = decodeURIComponent(new URL(request.url, 'http://x').pathname).slice(1);
    const relative = normalize(path);
    if (path in extra) {
      response.writeHead(200, { 'content-type': 'application/json' }).end(extra[path]);
      return;
    }
    if (relative.startsWith('..') || !ALLOWED.some((prefix) => relative.startsWith(prefix))) {
      response.writeHead(404).end();
      return;
    }
    try {
      const body = await readFile(join(ROOT, relative.split('/').join(sep)));
      response.writeHead(200, { 'content-type': TYPES[extname(relative)] ?? 'application/octet-stream' }).end(body);
    } catch {
      response.writeHead(404).end();
    }
  });
  await new Promise((resolve) => { server.listen(0, '127.0.0.1', resolve); });
  return { server, origin: `http://127.0.0.1:${server.address().port}` };
}
