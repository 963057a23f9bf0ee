// One client sends one report (a device; the example page): wait for hop 0, publish the sealed
// report, claim, and read hop 0's receipt for this client, resending until it is taken or hop 0
// closes its batch (docs/protocol.md, "Claims and receipts").

import { connectBroker } from './broker.js';
import { ProtocolError } from './errors.js';
import { decodeReceipt, encodeClaim, isAccepted } from './receipts.js';
import { sealReport } from './report.js';
import { Session } from './process.js';
import { topics } from './topics.js';
import { randomBytes } from './random.js';
import { toHex } from './bytes.js';

/**
 * Client ``index`` of process ``process`` reports ``value`` (its true value, in [0, k)) in
 * round ``roundId``. ``onReport(report)`` is called with the k-RR report before anything is
 * sent (what the page shows). Resolves with {report, accepted, closed, seq} from hop 0's
 * receipt; ProtocolError if hop 0 is not ready or gives no answer within ``timeoutSeconds``.
 */
export async function sendOneReport(sodium, mqtt, options) {
  const { manifest, roundId, process, index, value, keyOfProcess = null, onReport = () => {}, timeoutSeconds = 60 } = options;
  const name = `clients-${process}`;
  if (!Number.isInteger(process) || process < 0 || process >= manifest.clients.length) {
    throw new ProtocolError(`process must be one of the manifest's 0..${manifest.clients.length - 1}, got ${process}`);
  }
  if (!Number.isInteger(index) || index < 0 || index >= manifest.clients[process]) {
    throw new ProtocolError(`client index must be in [0, ${manifest.clients[process]}) for ${name}, got ${index}`);
  }
  const { report, message } = await sealReport(sodium, manifest, roundId, value, { process, index, keyOfProcess });
  onReport(report);
  const client = await connectBroker(mqtt, options.brokerUrl, {
    username: options.username, password: options.password, clientId: `sdp-${name}-${toHex(randomBytes(16))}`, subprotocols: options.subprotocols,
  });
  try {
    const session = new Session(client, manifest, roundId, name);
    await client.subscribeAsync(topics.status(manifest.prefix, roundId, 'hop-0'), { qos: 1 });
    if (manifest.clientAuth) await client.subscribeAsync(topics.receipt(manifest.prefix, roundId, name), { qos: 1 });
    await session.announce('waiting');
    await session.awaitHop0(timeoutSeconds);
    await session.announce('working');
    const ingress = topics.ingress(manifest.prefix, roundId);
    const claimAt = topics.claim(manifest.prefix, roundId, name);
    const clients = manifest.clients[process];
    let seq = 1;
    if (manifest.clientAuth) {
      // An early claim (nothing sent yet): hop 0 then owes this process a final receipt even
      // if this report is the one that fills its batch.
      await client.publishAsync(claimAt, encodeClaim({ seq, clients, sent: 0, confirmed: false }), { qos: 1 });
      seq += 1;
    }
    await client.publishAsync(ingress, message, { qos: 1 });
    await client.publishAsync(claimAt, encodeClaim({ seq, clients, sent: 1, confirmed: !manifest.clientAuth }), { qos: 1 });
    if (!manifest.clientAuth) {
      await session.announce('done', { sent: 1, seconds: 0, randomness: 'crypto.getRandomValues', authenticated: false });
      return { report, accepted: null, closed: false, seq: 0 };
    }
    const until = performance.now() / 1000 + timeoutSeconds;
    for (;;) {
      while (session.receipts.length) {
        const receipt = await decodeReceipt(session.receipts.shift(), roundId, process);
        if (receipt === null) continue;
        const accepted = index < receipt.clients && isAccepted(receipt.bitmap, index);
        if (accepted || receipt.closed) {
          await client.publishAsync(claimAt, encodeClaim({ seq: seq + 1, clients, sent: 1, confirmed: true }), { qos: 1 });
          await session.announce('done', { sent: 1, seconds: 0, randomness: 'crypto.getRandomValues', authenticated: true, delivery: { sent: 1, accepted: accepted ? 1 : 0, lost: accepted ? 0 : 1, unconfirmed: 0, resent: seq - 2, receipts: 1 } });
          return { report, accepted, closed: receipt.closed, seq: receipt.seq };
        }
        if (receipt.seq === seq) {
          await client.publishAsync(ingress, message, { qos: 1 }); // the very same bytes
          seq += 1;
          await client.publishAsync(claimAt, encodeClaim({ seq, clients, sent: 1, confirmed: false }), { qos: 1 });
        }
      }
      if (session.hop0Left(timeoutSeconds)) throw new ProtocolError('hop-0 left before it answered this report\'s claim');
      if (performance.now() / 1000 > until) throw new ProtocolError(`hop-0 gave no receipt within ${timeoutSeconds} s`);
      await session.waitEvent(1);
    }
  } finally {
    await client.endAsync();
  }
}
