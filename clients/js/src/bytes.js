// Byte helpers: hex, concatenation, unsigned big-endian integers (docs/protocol.md: "Integers
// are unsigned big-endian throughout").

import { ProtocolError } from './errors.js';

export function toHex(bytes) {
  return Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('');
}

export function fromHex(text, size, what) {
  if (typeof text !== 'string' || text.length !== 2 * size || !/^[0-9a-f]*$/.test(text)) {
    const shown = typeof text === 'string' ? `${text.length} characters` : typeof text;
    throw new ProtocolError(`${what} must be ${2 * size} lowercase hex characters, got ${shown}`);
  }
  const out = new Uint8Array(size);
  for (let i = 0; i < size; i += 1) out[i] = parseInt(text.slice(2 * i, 2 * i + 2), 16);
  return out;
}

export function concat(...parts) {
  const out = new Uint8Array(parts.reduce((sum, part) => sum + part.length, 0));
  let at = 0;
  for (const part of parts) {
    out.set(part, at);
    at += part.length;
  }
  return out;
}

export function u32(value) {
  const out = new Uint8Array(4);
  new DataView(out.buffer).setUint32(0, value);
  return out;
}

/** ``value`` (a BigInt in [0, 2^64)) as 8 big-endian bytes. */
export function u64(value) {
  const out = new Uint8Array(8);
  new DataView(out.buffer).setBigUint64(0, BigInt(value));
  return out;
}

export function requireBytes(value, size, what) {
  if (!(value instanceof Uint8Array)) {
    throw new ProtocolError(`${what} must be a Uint8Array of ${size} bytes, got ${typeof value}`);
  }
  if (value.length !== size) {
    throw new ProtocolError(`${what} must be ${size} bytes, got ${value.length}`);
  }
  return value;
}

export function equalBytes(a, b) {
  if (a.length !== b.length) return false;
  let diff = 0;
  for (let i = 0; i < a.length; i += 1) diff |= a[i] ^ b[i];
  return diff === 0;
}
