// Cross-implementation known answers (docs/protocol.md): what Python sealed opens here, and
// what this client computes equals what Python computed.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as c from '../src/index.js';
import { docVectors } from './doc-vectors.js';

const v = docVectors();
const sodium = await c.sodiumReady();
const hex = (bytes) => c.toHex(bytes);
const key = (text) => c.fromHex(text, 32, 'key');

async function manifest() {
  return c.loadManifest(sodium, JSON.stringify(v.manifest_file), v.manifest_file.manifest.coordinator);
}

function openEnvelope(envelopeHex) {
  const envelope = c.fromHex(envelopeHex, envelopeHex.length / 2, 'envelope');
  let layer = envelope.slice(40);
  const secrets = [...v.hop_secret_keys, v.analyzer_secret_key].map(key);
  for (const secret of secrets) layer = c.peel(sodium, layer, sodium.crypto_scalarmult_base(secret), secret);
  return { clientId: envelope.slice(0, 8), tag: envelope.slice(8, 40), onion: envelope.slice(40), record: layer };
}

test('the manifest digest equals the one Python computed', async () => {
  assert.equal(hex((await manifest()).digest), v.manifest_digest);
});

test('the record of the fixed inputs equals the one Python encoded', async () => {
  const m = await manifest();
  const record = c.encodeRecord(BigInt(v.round_id), v.value, m.k, m.digest, c.fromHex(v.padding, 19, 'padding'));
  assert.equal(hex(record), v.record);
});

test('process key, client id and client key equal Python\'s', async () => {
  const processKey = await c.processKey(key(v.master_key), v.process);
  assert.equal(hex(processKey), v.process_key);
  const clientId = c.clientIdOf(v.process, v.index);
  assert.equal(clientId, BigInt(v.client_id));
  assert.equal(hex(await c.clientKey(processKey, clientId)), v.client_key);
});

for (const [name, envelope] of [['Python', 'envelope_python'], ['JavaScript', 'envelope_js']]) {
  test(`the envelope sealed by ${name} opens hop by hop to the record, and its tag verifies here`, async () => {
    const opened = openEnvelope(v[envelope]);
    assert.equal(hex(opened.record), v.record);
    const clientId = c.clientIdOf(v.process, v.index);
    assert.equal(hex(opened.clientId), clientId.toString(16).padStart(16, '0'));
    const tag = await c.envelopeTag(key(v.client_key), BigInt(v.round_id), clientId, opened.onion);
    assert.equal(hex(tag), hex(opened.tag));
  });
}

test('a fresh JS envelope opens to the record and has the length of the spec', async () => {
  const m = await manifest();
  const clientId = c.clientIdOf(v.process, v.index);
  const onion = c.wrap(sodium, c.fromHex(v.record, 64, 'record'), m.hops.map((h) => h.box), m.analyzer.box);
  assert.equal(onion.length, c.messageLength(0, 2));
  const envelope = await c.sealEnvelope(key(v.client_key), clientId, BigInt(v.round_id), onion);
  assert.equal(hex(openEnvelope(hex(envelope)).record), v.record);
});

test('floats are written as Python repr writes them', () => {
  const cases = [[4, '4.0'], [60.002, '60.002'], [1e-6, '1e-06'], [1e-4, '0.0001'], [1e16, '1e+16'],
    [1.5e16, '1.5e+16'], [123456789012345680, '1.2345678901234568e+17'], [0.1, '0.1'], [1e-300, '1e-300'],
    [2.5, '2.5'], [1234.5, '1234.5'], [9999999999999998, '9999999999999998.0']];
  for (const [x, expected] of cases) assert.equal(c.pythonFloat(x), expected, String(x));
});

test('the receipt Python encoded reads here with exactly its bits', async () => {
  const payload = c.fromHex(v.receipt, v.receipt.length / 2, 'receipt');
  const receipt = await c.decodeReceipt(payload, BigInt(v.round_id), 1);
  assert.ok(receipt !== null && receipt.closed && receipt.seq === 3 && receipt.clients === 11);
  const accepted = [];
  for (let i = 0; i < receipt.clients; i += 1) if (receipt.bitmap[i >> 3] & (0x80 >> (i & 7))) accepted.push(i);
  assert.deepEqual(accepted, v.receipt_accepted);
  assert.equal(await c.decodeReceipt(payload, BigInt(v.round_id), 2), null); // another process
  const tampered = payload.slice();
  tampered[24] += 1; // says one more accepted than its bitmap holds
  assert.equal(await c.decodeReceipt(tampered, BigInt(v.round_id), 1), null);
});
