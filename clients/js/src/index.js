// shuffledp-client: a client of the shuffledp wire protocol (docs/protocol.md), for browsers and
// Node. Everything takes the libsodium object (``await sodiumReady()``) where it seals.

export { ProtocolError } from './errors.js';
export { sodiumReady } from './sodium.js';
export { toHex, fromHex } from './bytes.js';
export { krrReport, keepNumerator } from './krr.js';
export { uniformBelow } from './random.js';
export { encodeRecord, decodeRecord, RECORD_SIZE } from './record.js';
export { wrap, peel, messageLength, checkBoxKey } from './onion.js';
export { clientIdOf, processKey, clientKey, envelopeTag, sealEnvelope, ENVELOPE_SIZE } from './envelope.js';
export { loadManifest, canonicalBytes, pythonFloat } from './manifest.js';
export { decodeReceipt, encodeClaim } from './receipts.js';
export { sealReport } from './report.js';
export { connectBroker } from './broker.js';
export { runClientProcess } from './process.js';
export { sendOneReport } from './single.js';
export { topics } from './topics.js';
