// Drives the example page (example/index.html) as a person would, for the screenshot of
// docs/browser-client.md: fill the form, load and verify the manifest, choose the answer, send,
// wait for hop 0's receipt, take a PNG of the page. Used by browser-clients.mjs when its
// config has "exampleScreenshot" (a browser process of exactly one client).

export async function runExample(page, origin, config) {
  const [process] = config.processes;
  if (config.processes.length !== 1 || process.values.length !== 1) {
    throw new Error('the example page sends one report: it needs one browser process of one client');
  }
  await page.setViewport({ width: 900, height: 1000 });
  await page.goto(`${origin}/example/index.html?subprotocol=binary`, { waitUntil: 'load' });
  await page.waitForFunction(() => window.exampleReady === true, { timeout: 30_000 });
  const fill = async (id, value) => page.$eval(`#${id}`, (element, v) => { element.value = v; }, value);
  await fill('manifest', config.manifestText);
  await fill('coordinator', config.trustedCoordinator);
  await page.click('#load');
  await page.waitForFunction(() => !document.getElementById('send').disabled, { timeout: 30_000 });
  await fill('broker', config.brokerUrl);
  await fill('account', process.username ?? process.name);
  await fill('password', process.password ?? '');
  await fill('process-key', process.processKey ?? '');
  await fill('index', '0');
  await page.select('#value', String(process.values[0]));
  await page.select('#round', config.roundId);
  await page.click('#send');
  await page.waitForFunction(() => document.body.dataset.done, { timeout: 120_000 });
  // What the page holds: what it shows is the k-RR report; the form's answer is blanked for the
  // picture, so that the screenshot never shows a true value next to its report.
  await page.$eval('#value', (element) => { element.selectedIndex = -1; });
  for (const id of ['manifest', 'password', 'process-key']) await fill(id, id === 'manifest' ? '{"format": "shuffledp-round-manifest", ...}' : 'secret');
  await page.screenshot({ path: config.exampleScreenshot, fullPage: true });
  const done = await page.evaluate(() => document.body.dataset.done);
  if (done !== 'yes') throw new Error(`the example page did not send: ${await page.$eval('#receipt', (e) => e.textContent)}`);
  return [{ sent: 1, seconds: 0, delivery: { sent: 1, accepted: 1, lost: 0, unconfirmed: 0, resent: 0, receipts: 1 } }];
}
