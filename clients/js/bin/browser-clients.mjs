#!/usr/bin/env node
// Run client processes of a live round in headless Chromium: `node browser-clients.mjs
// CONFIG.json` (written by `shuffledp simulate --browser-clients N`, mode 0600: it holds the
// processes' broker passwords and process keys). Serves the runner page on 127.0.0.1, opens it
// in one page, runs every process of the config there, and writes the summary (browser and
// versions, each process's result, peak resident memory of the browser) to config.out. Exit 0
// if every process ended "done", else 1 with one line on stderr.
import { readFile, writeFile } from 'node:fs/promises';
import { serve } from './serve.mjs';
import { launchChromium, peakPss } from './chromium.mjs';
import { runExample } from './example-page.mjs';

function versions() {
  const read = (name) => readFile(new URL(`../node_modules/${name}/package.json`, import.meta.url), 'utf8')
    .then((text) => JSON.parse(text).version);
  return Promise.all(['libsodium-wrappers', 'mqtt', 'puppeteer-core'].map(read));
}

async function runProcesses(page, origin, config) {
  await page.goto(`${origin}/browser/runner.html`, { waitUntil: 'load' });
  await page.waitForFunction(() => typeof window.runProcesses === 'function', { timeout: 30_000 });
  return page.evaluate((c) => window.runProcesses(c), config);
}

async function main(configPath) {
  const config = JSON.parse(await readFile(configPath, 'utf8'));
  const [sodiumVersion, mqttVersion, puppeteerVersion] = await versions();
  const { server, origin } = await serve();
  const { browser, close } = await launchChromium(config.chromium, config.profileParent);
  const memory = peakPss(browser.process().pid);
  try {
    const product = await browser.version();
    const page = await browser.newPage();
    page.on('pageerror', (error) => process.stderr.write(`page error: ${error.message}\n`));
    page.on('console', (message) => process.stderr.write(`page: ${message.text()}\n`));
    const runtime = `${product} (puppeteer-core ${puppeteerVersion}); node ${process.version}; libsodium-wrappers ${sodiumVersion}; mqtt ${mqttVersion}`;
    const started = performance.now();
    const results = config.exampleScreenshot
      ? await runExample(page, origin, config)
      : await runProcesses(page, origin, { ...config, runtime });
    const seconds = (performance.now() - started) / 1000;
    const summary = {
      browser: product, runtime, userAgent: await browser.userAgent(), processes: results,
      seconds, peakPssBytes: await memory.stop(),
    };
    await writeFile(config.out, `${JSON.stringify(summary)}\n`);
  } finally {
    await memory.stop();
    await close();
    server.close();
  }
}

main(process.argv[2]).then(
  () => process.exit(0),
  (error) => {
    process.stderr.write(`browser clients: ${String(error?.message ?? error).split('\n')[0]}\n`);
    process.exit(1);
  },
);
