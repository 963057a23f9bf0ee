// The JavaScript half of the cross-implementation vectors of docs/protocol.md (one-off):
// reads the Python half (tools/js_vectors.py's output) on stdin, prints the
// record, onion and envelope this client seals for the same inputs.
import { readFileSync } from 'node:fs';
import * as c from '../src/index.js';

const v = JSON.parse(readFileSync(0, 'utf8'));
const sodium = await c.sodiumReady();
const manifest = await c.loadManifest(sodium, JSON.stringify(v.manifest_file), v.manifest_file.manifest.coordinator);
const record = c.encodeRecord(BigInt(v.round_id), v.value, manifest.k, manifest.digest, c.fromHex(v.padding, 19, 'padding'));
const onion = c.wrap(sodium, record, manifest.hops.map((h) => h.box), manifest.analyzer.box);
const keyOfProcess = await c.processKey(c.fromHex(v.master_key, 32, 'master'), v.process);
const clientId = c.clientIdOf(v.process, v.index);
const key = await c.clientKey(keyOfProcess, clientId);
const envelope = await c.sealEnvelope(key, clientId, BigInt(v.round_id), onion);
console.log(JSON.stringify({ manifest_digest: c.toHex(manifest.digest), record: c.toHex(record), envelope_js: c.toHex(envelope) }, null, 1));
