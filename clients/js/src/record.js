// The record, version 2, 64 bytes (docs/protocol.md, "The record"):
// version u8 | round id u64 | value u32 | manifest digest (32) | padding (19, random).

import { concat, requireBytes, u32, u64 } from './bytes.js';
import { ProtocolError } from './errors.js';
import { randomBytes } from './random.js';

export const RECORD_VERSION = 2;
export const RECORD_SIZE = 64;
export const DIGEST_SIZE = 32;
export const PADDING_SIZE = RECORD_SIZE - 1 - 8 - 4 - DIGEST_SIZE;

export function checkRoundId(roundId) {
  if (typeof roundId !== 'bigint' || roundId < 0n || roundId >= 2n ** 64n) {
    throw new ProtocolError(`round id must be a BigInt in [0, 2^64), got ${String(roundId)}`);
  }
  return roundId;
}

/** The record of ``value`` (in [0, k)) for round ``roundId`` (BigInt) under the manifest whose
 * digest is ``digest``; ``padding`` (19 bytes) only for known-answer tests. */
export function encodeRecord(roundId, value, k, digest, padding = randomBytes(PADDING_SIZE)) {
  checkRoundId(roundId);
  if (!Number.isInteger(k) || k < 2 || k > 2 ** 32) {
    throw new ProtocolError(`k must be an integer in [2, 2^32], got ${k}`);
  }
  if (!Number.isInteger(value) || value < 0 || value >= k) {
    throw new ProtocolError(`value must be an integer in [0, k) = [0, ${k}), got ${value}`);
  }
  requireBytes(digest, DIGEST_SIZE, 'manifest digest');
  requireBytes(padding, PADDING_SIZE, 'padding');
  return concat(Uint8Array.of(RECORD_VERSION), u64(roundId), u32(value), digest, padding);
}

/** {version, roundId, value, digest} of a record (no check but its length: tests only). */
export function decodeRecord(record) {
  requireBytes(record, RECORD_SIZE, 'record');
  const view = new DataView(record.buffer, record.byteOffset, record.byteLength);
  return {
    version: record[0],
    roundId: view.getBigUint64(1),
    value: view.getUint32(9),
    digest: record.slice(13, 13 + DIGEST_SIZE),
  };
}
