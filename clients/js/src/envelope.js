// The client envelope (docs/protocol.md, "The client envelope"):
// client_id u64 | tag (32) | onion, tag = HMAC-SHA256(client_key, DOMAIN_REPORT | round u64 |
// client_id u64 | onion). HMAC-SHA256 is the platform's WebCrypto (crypto.subtle), which
// browsers and Node both carry; libsodium-wrappers' standard build has no HMAC-SHA256.

import { concat, requireBytes, u32, u64 } from './bytes.js';
import { ProtocolError } from './errors.js';
import { checkRoundId } from './record.js';

const text = new TextEncoder();
export const DOMAIN_PROCESS = text.encode('shuffledp/client-process-key/v1\0');
export const DOMAIN_CLIENT = text.encode('shuffledp/client-key/v1\0');
export const DOMAIN_REPORT = text.encode('shuffledp/report-tag/v1\0');
export const ENVELOPE_SIZE = 40;

export async function hmacSha256(key, message) {
  requireBytes(key, 32, 'HMAC key');
  const handle = await globalThis.crypto.subtle.importKey(
    'raw', key, { name: 'HMAC', hash: 'SHA-256' }, false, ['sign'],
  );
  return new Uint8Array(await globalThis.crypto.subtle.sign('HMAC', handle, message));
}

/** The id of client ``index`` of client process ``process``: process << 32 | index (BigInt). */
export function clientIdOf(process, index) {
  if (!Number.isInteger(process) || process < 0 || process >= 2 ** 16) {
    throw new ProtocolError(`client process must be an integer in [0, 2^16), got ${process}`);
  }
  if (!Number.isInteger(index) || index < 0 || index >= 2 ** 32) {
    throw new ProtocolError(`client index must be an integer in [0, 2^32), got ${index}`);
  }
  return (BigInt(process) << 32n) | BigInt(index);
}

export async function processKey(master, process) {
  return hmacSha256(requireBytes(master, 32, 'master key'), concat(DOMAIN_PROCESS, u32(process)));
}

export async function clientKey(keyOfProcess, clientId) {
  return hmacSha256(requireBytes(keyOfProcess, 32, 'process key'), concat(DOMAIN_CLIENT, u64(clientId)));
}

export async function envelopeTag(key, roundId, clientId, onion) {
  return hmacSha256(key, concat(DOMAIN_REPORT, u64(checkRoundId(roundId)), u64(clientId), onion));
}

/** What client ``clientId`` (key ``key``) publishes to hop 0 for ``onion`` in ``roundId``. */
export async function sealEnvelope(key, clientId, roundId, onion) {
  const tag = await envelopeTag(key, roundId, clientId, onion);
  return concat(u64(clientId), tag, onion);
}
