// A client process (clients-j) on a live round: wait for hop 0, send one report per client,
// then claims and receipts until hop 0 confirms (docs/protocol.md, "Claims and receipts").
// The same code runs in Node and in a browser page; ``mqtt`` is the mqtt.js module.

import { connectBroker, payloadBytes } from './broker.js';
import { ProtocolError } from './errors.js';
import { decodeReceipt, encodeClaim, isAccepted } from './receipts.js';
import { sealReport } from './report.js';
import { END_STATES, READY_STATES, topics } from './topics.js';
import { randomBytes } from './random.js';
import { toHex } from './bytes.js';

const now = () => performance.now() / 1000;

/** Checks the process's parameters against the manifest; returns the process index. */
function checkPlan(manifest, roundId, name, values, keyOfProcess) {
  if (!manifest.rounds.includes(roundId)) {
    throw new ProtocolError(`round ${roundId} is not one of the manifest's rounds`);
  }
  const match = /^clients-(0|[1-9][0-9]*)$/.exec(name);
  const process = match ? Number(match[1]) : -1;
  if (process < 0 || process >= manifest.clients.length) {
    throw new ProtocolError(`name must be one of clients-0..clients-${manifest.clients.length - 1}, got ${name}`);
  }
  if (values.length !== manifest.clients[process]) {
    throw new ProtocolError(`values must be the manifest's clients[${process}] = ${manifest.clients[process]}, got ${values.length}`);
  }
  if (manifest.clientAuth && !(keyOfProcess instanceof Uint8Array && keyOfProcess.length === 32)) {
    throw new ProtocolError('the manifest has client_auth: the process key must be 32 bytes');
  }
  return process;
}

export class Session {
  constructor(client, manifest, roundId, name) {
    Object.assign(this, { client, manifest, roundId, name, hop0: null, hop0Cleared: null });
    this.prefix = manifest.prefix;
    this.receipts = [];
    this.wake = null;
    client.on('message', (topic, payload) => this.onMessage(topic, payloadBytes(payload)));
  }

  onMessage(topic, payload) {
    if (topic === topics.status(this.prefix, this.roundId, 'hop-0')) {
      if (payload.length === 0) {
        this.hop0 = null;
        this.hop0Cleared = now();
      } else {
        try { this.hop0 = JSON.parse(new TextDecoder().decode(payload)).state ?? null; } catch { /* ignored */ }
      }
    } else {
      this.receipts.push(payload);
    }
    this.wake?.();
  }

  waitEvent(seconds) {
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, seconds * 1000);
      this.wake = () => { clearTimeout(timer); this.wake = null; resolve(); };
    });
  }

  async announce(state, fields = {}) {
    const body = JSON.stringify({ stage: this.name, state, time: Date.now() / 1000, ...fields });
    await this.client.publishAsync(topics.status(this.prefix, this.roundId, this.name), body, { qos: 1 });
  }

  async progress(counts) {
    const body = JSON.stringify({ stage: this.name, time: Date.now() / 1000, ...counts });
    await this.client.publishAsync(topics.progress(this.prefix, this.roundId, this.name), body, { qos: 1 });
  }

  async awaitHop0(timeoutSeconds) {
    const until = now() + timeoutSeconds;
    while (!READY_STATES.has(this.hop0)) {
      if (now() > until) throw new ProtocolError(`${this.name}: hop-0 of round ${this.roundId} did not announce ready within ${timeoutSeconds} s`);
      await this.waitEvent(0.2);
    }
  }

  hop0Left(readyTimeout) {
    if (END_STATES.has(this.hop0)) return true;
    return this.hop0 === null && this.hop0Cleared !== null && now() - this.hop0Cleared > readyTimeout;
  }
}

async function publishWindow(client, topic, messages, maxInFlight) {
  let next = 0;
  const worker = async () => {
    while (next < messages.length) {
      const message = messages[next];
      next += 1;
      await client.publishAsync(topic, message, { qos: 1 });
    }
  };
  await Promise.all(Array.from({ length: Math.min(maxInFlight, messages.length) }, worker));
}

async function sendAll(session, sodium, plan, ledger) {
  const { values, process, keyOfProcess, maxInFlight, chunk } = plan;
  const ingress = topics.ingress(session.prefix, session.roundId);
  let lastProgress = 0;
  for (let start = 0; start < values.length; start += chunk) {
    const part = values.slice(start, start + chunk);
    const sealed = [];
    for (let i = 0; i < part.length; i += 1) {
      const { message } = await sealReport(sodium, session.manifest, session.roundId, part[i], { process, index: start + i, keyOfProcess });
      sealed.push(message);
      ledger.messages[start + i] = message;
    }
    await publishWindow(session.client, ingress, sealed, maxInFlight);
    ledger.sent += sealed.length;
    if (now() - lastProgress >= 0.5 || ledger.sent === values.length) {
      lastProgress = now();
      await session.progress({ sent: ledger.sent, total: values.length });
    }
  }
}

/** Claim before sending (sent 0): hop 0 then owes this process a final receipt even if the
 * process's last report is the one that fills hop 0's batch (a claim arriving after the batch
 * closed would get no answer). Returns the claim's number. */
async function earlyClaim(session, clients) {
  const claimTopic = topics.claim(session.prefix, session.roundId, session.name);
  await session.client.publishAsync(claimTopic, encodeClaim({ seq: 1, clients, sent: 0, confirmed: false }), { qos: 1 });
  return 1;
}

async function deliver(session, plan, ledger, early = 0) {
  const { process, readyTimeout, reclaimInterval, maxInFlight } = plan;
  const claimTopic = topics.claim(session.prefix, session.roundId, session.name);
  const ingress = topics.ingress(session.prefix, session.roundId);
  const out = { sent: ledger.sent, accepted: 0, lost: 0, unconfirmed: 0, resent: 0, receipts: 0 };
  let seq = early;
  let lastClaim = -Infinity;
  const claim = async (confirmed) => {
    seq += 1;
    await session.client.publishAsync(claimTopic, encodeClaim({ seq, clients: ledger.messages.length, sent: ledger.sent, confirmed }), { qos: 1 });
    lastClaim = now();
  };
  await claim(false);
  let final = false;
  for (;;) {
    while (session.receipts.length) {
      const receipt = await decodeReceipt(session.receipts.shift(), session.roundId, process);
      if (receipt === null) continue;
      out.receipts += 1;
      ledger.messages.forEach((message, i) => {
        if (message !== null && i < receipt.clients && isAccepted(receipt.bitmap, i)) ledger.messages[i] = null;
      });
      const missing = ledger.messages.filter((m) => m !== null);
      if (missing.length === 0) { final = true; break; }
      if (receipt.closed) { final = true; out.lost = missing.length; break; }
      if (receipt.seq === seq) {
        await publishWindow(session.client, ingress, missing, maxInFlight);
        out.resent += missing.length;
        await claim(false);
      }
    }
    if (final) break;
    if (session.hop0Left(readyTimeout)) {
      out.unconfirmed = ledger.messages.filter((m) => m !== null).length;
      break;
    }
    if (now() - lastClaim >= reclaimInterval) await claim(false);
    await session.waitEvent(reclaimInterval);
  }
  out.accepted = ledger.messages.length - ledger.messages.filter((m) => m !== null).length;
  await claim(true);
  return out;
}

/**
 * Run client process ``name`` (clients-j) of round ``roundId`` (BigInt) of the verified
 * ``manifest`` (loadManifest): one report per value in ``values`` (true values in [0, k); they
 * never leave this function: only the sealed k-RR reports do). ``keyOfProcess``: the process key
 * (32 bytes) when the manifest has client_auth. Returns what it announces with ``done``.
 * ProtocolError for bad parameters, a refused connection, hop 0 not ready in time, or (unless
 * ``acceptLoss``) reports hop 0's final receipt misses.
 */
export async function runClientProcess(sodium, mqtt, options) {
  const { manifest, roundId, name, values, brokerUrl, username, password, subprotocols, keyOfProcess = null, runtime = 'unknown' } = options;
  const process = checkPlan(manifest, roundId, name, values, keyOfProcess);
  for (const value of values) {
    if (!Number.isInteger(value) || value < 0 || value >= manifest.k) {
      throw new ProtocolError(`every value must be an integer in [0, k) = [0, ${manifest.k}), got ${value}`);
    }
  }
  const plan = {
    values, process, keyOfProcess, maxInFlight: options.maxInFlight ?? 128, chunk: options.chunk ?? 500,
    readyTimeout: options.readyTimeout ?? 60, reclaimInterval: options.reclaimInterval ?? 1,
  };
  const clientId = `sdp-${name}-${toHex(randomBytes(16))}`;
  const client = await connectBroker(mqtt, brokerUrl, { username, password, clientId, subprotocols });
  try {
    const session = new Session(client, manifest, roundId, name);
    await client.subscribeAsync(topics.status(manifest.prefix, roundId, 'hop-0'), { qos: 1 });
    if (manifest.clientAuth) await client.subscribeAsync(topics.receipt(manifest.prefix, roundId, name), { qos: 1 });
    await session.announce('waiting');
    await session.awaitHop0(plan.readyTimeout);
    await session.announce('working');
    const early = manifest.clientAuth ? await earlyClaim(session, values.length) : 0;
    const started = now();
    const ledger = { messages: new Array(values.length).fill(null), sent: 0 };
    await sendAll(session, sodium, plan, ledger);
    const seconds = now() - started;
    const result = { sent: ledger.sent, seconds: Math.round(seconds * 1e6) / 1e6, randomness: 'crypto.getRandomValues', authenticated: manifest.clientAuth, runtime };
    if (!manifest.clientAuth) {
      await client.publishAsync(topics.claim(manifest.prefix, roundId, name), encodeClaim({ seq: 1, clients: values.length, sent: ledger.sent, confirmed: true }), { qos: 1 });
    } else {
      result.delivery = await deliver(session, plan, ledger, early);
      if (result.delivery.lost && !options.acceptLoss) {
        const line = `lost ${result.delivery.lost} of ${result.delivery.sent} reports between ${name} and hop-0`;
        await session.announce('failed', { error: line, ...result });
        throw new ProtocolError(line);
      }
    }
    await session.announce('done', result);
    return result;
  } finally {
    await client.endAsync();
  }
}
