#!/usr/bin/env node
// Seal cost per report (k-RR, record, onion of H + 1 sealed boxes, envelope) of the JavaScript
// client in Node and in headless Chromium: `node bench-seal.mjs COUNT HOPS CHROMIUM`. Prints
// one JSON line {"node_us", "browser_us", "browser"} (microseconds per report, median of 3 runs
// of COUNT reports each). bench/browser.py runs it next to the Python figure.
import { serve } from './serve.mjs';
import { launchChromium } from './chromium.mjs';
import * as client from '../src/index.js';

async function sealLoop(c, count, hops) {
  const sodium = await c.sodiumReady();
  const box = () => sodium.crypto_box_keypair().publicKey;
  const manifest = {
    k: 15, eps0: 4, clientAuth: true, hops: Array.from({ length: hops }, () => ({ box: box() })),
    analyzer: { box: box() }, digest: new Uint8Array(32).fill(7),
  };
  const keyOfProcess = new Uint8Array(32).fill(9);
  const runs = [];
  for (let run = 0; run < 3; run += 1) {
    const started = performance.now();
    for (let i = 0; i < count; i += 1) {
      await c.sealReport(sodium, manifest, 1n, i % 15, { process: 0, index: i, keyOfProcess });
    }
    runs.push(((performance.now() - started) * 1000) / count);
  }
  return runs.sort((a, b) => a - b)[1];
}

const [count, hops, chromium] = [Number(process.argv[2] ?? 2000), Number(process.argv[3] ?? 3), process.argv[4] ?? '/usr/bin/chromium'];
const nodeUs = await sealLoop(client, count, hops);
const { server, origin } = await serve();
const { browser, close } = await launchChromium(chromium);
try {
  const page = await browser.newPage();
  await page.goto(`${origin}/browser/runner.html`, { waitUntil: 'load' });
  await page.waitForFunction(() => typeof window.runProcesses === 'function');
  const browserUs = await page.evaluate(
    `(${sealLoop.toString()})(await import('/src/index.js'), ${count}, ${hops})`.replace(/^/, '(async () => ') + ')()',
  );
  console.log(JSON.stringify({ node_us: nodeUs, browser_us: browserUs, browser: await browser.version() }));
} finally {
  await close();
  server.close();
}
