// No Math.random is reachable from the client: none in src/, and sealing reports with
// Math.random replaced by a function that throws still works.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import * as c from '../src/index.js';
import { docVectors } from './doc-vectors.js';

test('no source file of the client names Math.random', () => {
  const dir = new URL('../src/', import.meta.url);
  const files = readdirSync(dir).filter((f) => f.endsWith('.js'));
  assert.ok(files.length >= 10);
  for (const file of files) {
    const text = readFileSync(new URL(file, dir), 'utf8').replace(/\/\/.*$/gm, '');
    assert.ok(!/Math\s*\.\s*random|Math\s*\[/.test(text), `${file} names Math.random`);
  }
});

test('k-RR, the record, the onion and the envelope never call Math.random', async () => {
  const v = docVectors();
  const sodium = await c.sodiumReady();
  const manifest = await c.loadManifest(sodium, JSON.stringify(v.manifest_file), v.manifest_file.manifest.coordinator);
  const original = Math.random;
  let calls = 0;
  Math.random = () => { calls += 1; throw new Error('Math.random called'); };
  try {
    const keyOfProcess = c.fromHex(v.process_key, 32, 'key');
    for (let i = 0; i < 200; i += 1) {
      const { report, message } = await c.sealReport(sodium, manifest, BigInt(v.round_id), i % 5, { process: 1, index: i, keyOfProcess });
      assert.ok(report >= 0 && report < 5);
      assert.equal(message.length, c.ENVELOPE_SIZE + c.messageLength(0, 2));
    }
  } finally {
    Math.random = original;
  }
  assert.equal(calls, 0);
});
