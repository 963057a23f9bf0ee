// Claims and receipts (docs/protocol.md, "Claims and receipts"). A claim is JSON
// {"seq", "clients", "sent", "confirmed"}; a receipt is a 30-byte header (magic "SDPR",
// version 1, round u64, process u32, clients u32, accepted u32, seq u32, closed u8) and the
// zlib of a bitmap (bit i of byte i >> 3, most significant first, set iff client i was taken).
// Receipts are read defensively: anything not exactly well formed gives null, never an error,
// and the bitmap never inflates past its length. Inflating uses the platform's
// DecompressionStream('deflate') (zlib format), in browsers and Node alike.

const HEADER = 30;
const MAGIC = [0x53, 0x44, 0x50, 0x52];

export function encodeClaim({ seq, clients, sent, confirmed }) {
  return new TextEncoder().encode(JSON.stringify({ seq, clients, sent, confirmed }));
}

async function inflateBounded(data, size) {
  const stream = new Blob([data]).stream().pipeThrough(new DecompressionStream('deflate'));
  const reader = stream.getReader();
  const out = new Uint8Array(size);
  let at = 0;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      if (at + value.length > size) {
        await reader.cancel();
        return null;
      }
      out.set(value, at);
      at += value.length;
    }
  } catch {
    return null; // corrupt, truncated, or junk after the end of the stream
  }
  return at === size ? out : null;
}

export function bitCount(bitmap) {
  let count = 0;
  for (const byte of bitmap) {
    let b = byte;
    while (b) {
      count += b & 1;
      b >>= 1;
    }
  }
  return count;
}

export function isAccepted(bitmap, index) {
  return (bitmap[index >> 3] & (0x80 >> (index & 7))) !== 0;
}

/** The receipt in ``payload`` for round ``roundId`` (BigInt) and process ``process``, or null. */
export async function decodeReceipt(payload, roundId, process) {
  if (!(payload instanceof Uint8Array) || payload.length < HEADER) return null;
  const view = new DataView(payload.buffer, payload.byteOffset, payload.byteLength);
  if (MAGIC.some((byte, i) => payload[i] !== byte) || payload[4] !== 1) return null;
  if (view.getBigUint64(5) !== roundId || view.getUint32(13) !== process) return null;
  const clients = view.getUint32(17);
  const accepted = view.getUint32(21);
  const seq = view.getUint32(25);
  const closed = payload[29];
  if (closed > 1) return null;
  const size = Math.ceil(clients / 8);
  const bitmap = await inflateBounded(payload.subarray(HEADER), size);
  if (bitmap === null) return null;
  if (clients % 8 && size && bitmap[size - 1] & (0xff >> (clients % 8))) return null;
  if (bitCount(bitmap) !== accepted) return null;
  return { roundId, process, clients, accepted, seq, closed: closed === 1, bitmap };
}
