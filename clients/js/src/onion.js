// The onion (docs/protocol.md, "The onion"): the record sealed to the analyzer, then to hop
// H-1, ..., outermost to hop 0; each crypto_box_seal adds 48 bytes.

import { requireBytes } from './bytes.js';
import { ProtocolError } from './errors.js';
import { RECORD_SIZE } from './record.js';

export const KEY_SIZE = 32;
export const SEAL_OVERHEAD = 48;

/** Bytes of every message stage ``stage`` (0..H; H the analyzer) receives with H hops. */
export function messageLength(stage, hops, recordSize = RECORD_SIZE) {
  if (!Number.isInteger(hops) || hops < 0 || !Number.isInteger(stage) || stage < 0 || stage > hops) {
    throw new ProtocolError(`stage must be an integer in [0, hops] = [0, ${hops}], got ${stage}`);
  }
  return recordSize + SEAL_OVERHEAD * (hops - stage + 1);
}

/** Checks a stage's X25519 public key: 32 bytes, and a point libsodium can seal to (it refuses
 * low-order points such as all zeros). */
export function checkBoxKey(sodium, key, what) {
  requireBytes(key, KEY_SIZE, what);
  try {
    sodium.crypto_box_seal(new Uint8Array(0), key);
  } catch {
    throw new ProtocolError(`${what} must be a valid X25519 point (not of low order)`);
  }
  return key;
}

export function wrap(sodium, record, hopKeys, analyzerKey) {
  if (!Array.isArray(hopKeys) || hopKeys.length === 0) {
    throw new ProtocolError('hop keys must name at least one hop, got none');
  }
  let sealed = sodium.crypto_box_seal(record, analyzerKey);
  for (let i = hopKeys.length - 1; i >= 0; i -= 1) sealed = sodium.crypto_box_seal(sealed, hopKeys[i]);
  return sealed;
}

/** One layer off (tests and the cross-implementation vectors). */
export function peel(sodium, ciphertext, publicKey, privateKey) {
  return sodium.crypto_box_seal_open(ciphertext, publicKey, privateKey);
}
