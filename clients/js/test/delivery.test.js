// A client process's claims, receipts and resends (docs/protocol.md, "Claims and receipts")
// against a scripted hop 0 on a fake MQTT client: what is resent is exactly what the receipt
// misses, byte for byte, and a final receipt that misses reports is a loss in one line.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import { deflateSync } from 'node:zlib';
import * as c from '../src/index.js';
import { docVectors } from './doc-vectors.js';

const v = docVectors();
const sodium = await c.sodiumReady();
const ROUND = BigInt(v.round_id);

function receipt(clients, accepted, seq, closed) {
  const header = Buffer.alloc(30);
  header.write('SDPR', 0, 'latin1');
  header[4] = 1;
  header.writeBigUInt64BE(ROUND, 5);
  header.writeUInt32BE(0, 13);
  header.writeUInt32BE(clients, 17);
  header.writeUInt32BE(accepted.length, 21);
  header.writeUInt32BE(seq, 25);
  header[29] = closed ? 1 : 0;
  const bitmap = Buffer.alloc(Math.ceil(clients / 8));
  for (const i of accepted) bitmap[i >> 3] |= 0x80 >> (i & 7);
  return Buffer.concat([header, deflateSync(bitmap)]);
}

/** A fake mqtt module: hop 0 is ready at once; ``answer(claim, ingress)`` returns the receipt
 * to send for a claim (or null), given every report published so far. */
function fakeMqtt(answer) {
  const client = new EventEmitter();
  client.published = [];
  client.subscribeAsync = async (topic) => {
    if (topic.endsWith('/status/hop-0')) setImmediate(() => client.emit('message', topic, Buffer.from('{"state":"ready"}')));
  };
  client.publishAsync = async (topic, payload) => {
    client.published.push([topic, Buffer.from(payload)]);
    if (topic.includes('/claim/')) {
      const claim = JSON.parse(Buffer.from(payload).toString());
      const reply = claim.confirmed ? null : answer(claim, client.published.filter(([t]) => t.endsWith('/hop/0')));
      if (reply) setImmediate(() => client.emit('message', topic.replace('/claim/', '/receipt/'), reply));
    }
  };
  client.endAsync = async () => {};
  return { client, module: { connectAsync: async () => client } };
}

async function run(answer, values) {
  const manifest = await c.loadManifest(sodium, JSON.stringify(v.manifest_file), v.manifest_file.manifest.coordinator);
  const one = { ...manifest, clients: [values.length] };
  const fake = fakeMqtt(answer);
  const options = { manifest: one, roundId: ROUND, name: 'clients-0', values, brokerUrl: 'mqtt://fake', keyOfProcess: new Uint8Array(32), reclaimInterval: 0.05, readyTimeout: 2 };
  return { fake, result: c.runClientProcess(sodium, fake.module, options) };
}

test('a receipt missing two reports makes the process resend exactly those two, then all are confirmed', async () => {
  const { fake, result } = await run((claim, reports) => {
    if (claim.sent === 0) return receipt(5, [], claim.seq, false);
    if (reports.length === 5) return receipt(5, [0, 2, 4], claim.seq, false);
    return receipt(5, [0, 1, 2, 3, 4], claim.seq, false);
  }, [0, 1, 2, 3, 4]);
  const done = await result;
  assert.equal(done.delivery.accepted, 5);
  assert.equal(done.delivery.resent, 2);
  const reports = fake.client.published.filter(([t]) => t.endsWith('/hop/0')).map(([, p]) => p.toString('hex'));
  assert.equal(reports.length, 7);
  assert.deepEqual(reports.slice(5), [reports[1], reports[3]]); // the very same bytes
});

test('a final receipt that misses reports is a loss, in one line', async () => {
  const { result } = await run((claim) => receipt(4, [0, 3], claim.seq, claim.sent > 0), [1, 1, 1, 1]);
  await assert.rejects(result, /^ProtocolError: lost 2 of 4 reports between clients-0 and hop-0$/);
});
