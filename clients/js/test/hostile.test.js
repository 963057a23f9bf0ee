// Hostile input gives one clear error: a bad manifest signature, a key of the wrong length,
// a broker refusing the connection.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import mqtt from 'mqtt';
import * as c from '../src/index.js';
import { docVectors } from './doc-vectors.js';

const v = docVectors();
const sodium = await c.sodiumReady();
const trusted = v.manifest_file.manifest.coordinator;

function altered(change) {
  const file = structuredClone(v.manifest_file);
  change(file);
  return JSON.stringify(file);
}

test('a manifest changed after signing is refused', async () => {
  await assert.rejects(c.loadManifest(sodium, altered((f) => { f.manifest.eps0 = 8.0; }), trusted),
    /manifest signature must verify with the coordinator key, it does not/);
});

test('a manifest whose signature is of another key is refused', async () => {
  await assert.rejects(c.loadManifest(sodium, altered((f) => { f.signature = '00'.repeat(64); }), trusted),
    /manifest signature must verify/);
});

test('a manifest naming another coordinator than the trusted one is refused', async () => {
  await assert.rejects(c.loadManifest(sodium, JSON.stringify(v.manifest_file), '11'.repeat(32)),
    /manifest must be signed by the trusted coordinator key 1111111111111111\.\.\., it names/);
});

test('a stage key of the wrong length is refused, naming the field', async () => {
  await assert.rejects(c.loadManifest(sodium, altered((f) => { f.manifest.hops[1].box = 'ab'.repeat(31); }), trusted),
    /manifest field hops\[1\]\.box must be 64 lowercase hex characters, got 62 characters/);
  await assert.rejects(c.loadManifest(sodium, altered((f) => { f.manifest.analyzer.box = '00'.repeat(32); }), trusted),
    /manifest field analyzer\.box must be a valid X25519 point/);
  assert.throws(() => c.encodeRecord(1n, 0, 2, new Uint8Array(31)), /manifest digest must be 32 bytes, got 31/);
});

test('an integer past 2^53 - 1 is refused, never rounded', async () => {
  const text = JSON.stringify(v.manifest_file).replace('[7,1099511627781]', '[7,18446744073709551615]');
  await assert.rejects(c.loadManifest(sodium, text, trusted), /manifest field rounds must be an integer/);
});

// A server that answers every CONNECT with CONNACK "not authorized" (return code 5).
test('a broker refusing the connection gives one line naming the broker and the reason', async () => {
  const server = net.createServer((socket) => {
    socket.once('data', () => socket.end(Buffer.from([0x20, 0x02, 0x00, 0x05])));
  });
  await new Promise((resolve) => { server.listen(0, '127.0.0.1', resolve); });
  const url = `mqtt://127.0.0.1:${server.address().port}`;
  try {
    await assert.rejects(c.connectBroker(mqtt, url, { username: 'clients-0', password: 'wrong', clientId: 'x' }),
      new RegExp(`^ProtocolError: the broker at ${url} refused clients-0: not authorized \\(CONNACK 5\\)$`));
  } finally {
    server.close();
  }
});

test('a broker that is not there gives one line too', async () => {
  const server = net.createServer();
  await new Promise((resolve) => { server.listen(0, '127.0.0.1', resolve); });
  const { port } = server.address();
  await new Promise((resolve) => { server.close(resolve); });
  await assert.rejects(c.connectBroker(mqtt, `mqtt://127.0.0.1:${port}`, { username: 'clients-0', clientId: 'x' }),
    /the broker at mqtt:\/\/127\.0\.0\.1:\d+ refused clients-0: .*ECONNREFUSED/);
});

test('receipts that are not exactly well formed are ignored (null)', async () => {
  const header = new Uint8Array(30);
  header.set([0x53, 0x44, 0x50, 0x52, 1]);
  assert.equal(await c.decodeReceipt(header, 0n, 0), null); // no zlib body
  assert.equal(await c.decodeReceipt(new Uint8Array(5), 0n, 0), null);
});
