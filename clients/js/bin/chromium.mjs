// Headless Chromium (the system's, never a download) through puppeteer-core, and the peak
// memory of its process tree (proportional set size, PSS, of every process under it, sampled:
// pages shared between Chromium's processes are counted once in all, not once per process).
import { mkdtemp, readFile, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import puppeteer from 'puppeteer-core';

export const CHROMIUM_ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic',
  '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync',
  '--disable-dev-shm-usage'];

/** Chromium with a new empty profile in ``profileParent`` (removed on close; a caller that may
 * be killed passes a folder it removes itself). */
export async function launchChromium(executablePath, profileParent = tmpdir()) {
  const profile = await mkdtemp(join(profileParent, 'shuffledp-chromium-'));
  const browser = await puppeteer.launch({
    executablePath, headless: true, pipe: true, args: [...CHROMIUM_ARGS, `--user-data-dir=${profile}`],
    handleSIGTERM: true, handleSIGINT: true, handleSIGHUP: true,
  });
  const close = async () => {
    await browser.close().catch(() => {});
    await rm(profile, { recursive: true, force: true });
  };
  return { browser, close };
}

async function children() {
  const parents = new Map();
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = await readFile(`/proc/${entry}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (!parents.has(ppid)) parents.set(ppid, []);
      parents.get(ppid).push(Number(entry));
    } catch { /* gone */ }
  }
  return parents;
}

/** PSS bytes of ``pid`` and every process under it (Linux /proc/PID/smaps_rollup). */
export async function treePss(pid) {
  const parents = await children();
  let total = 0;
  const stack = [pid];
  while (stack.length) {
    const p = stack.pop();
    try {
      const rollup = await readFile(`/proc/${p}/smaps_rollup`, 'utf8');
      total += Number(/^Pss:\s+(\d+) kB/m.exec(rollup)?.[1] ?? 0) * 1024;
    } catch { /* gone */ }
    stack.push(...(parents.get(p) ?? []));
  }
  return total;
}

/** Samples treePss(pid) every ``ms``; ``stop()`` resolves with the peak in bytes. */
export function peakPss(pid, ms = 250) {
  let peak = 0;
  let running = true;
  const loop = (async () => {
    while (running) {
      peak = Math.max(peak, await treePss(pid));
      await new Promise((resolve) => { setTimeout(resolve, ms); });
    }
  })();
  return { stop: async () => { running = false; await loop; return peak; } };
}
