// One client's report: k-RR, the record, the onion, and (with client authentication) the
// envelope. Pure but for randomness (crypto.getRandomValues only).

import { krrReport } from './krr.js';
import { encodeRecord } from './record.js';
import { wrap } from './onion.js';
import { clientKey, clientIdOf, sealEnvelope } from './envelope.js';

/** {report, message}: the k-RR report of ``value`` (what leaves the device, sealed) and the
 * bytes to publish to hop 0 for client ``index`` of client process ``process``. */
export async function sealReport(sodium, manifest, roundId, value, { process = 0, index = 0, keyOfProcess = null } = {}) {
  const report = krrReport(value, manifest.k, manifest.eps0);
  const record = encodeRecord(roundId, report, manifest.k, manifest.digest);
  const onion = wrap(sodium, record, manifest.hops.map((hop) => hop.box), manifest.analyzer.box);
  if (!manifest.clientAuth) return { report, message: onion };
  const clientId = clientIdOf(process, index);
  const key = await clientKey(keyOfProcess, clientId);
  return { report, message: await sealEnvelope(key, clientId, roundId, onion) };
}
