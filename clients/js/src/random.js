// The only randomness of the client: crypto.getRandomValues (the OS CSPRNG, in browsers and in
// Node >= 19). Nothing here or anywhere in src/ calls Math.random (test/no-math-random.test.js).

/** A fresh uniform 32-bit word. */
export function randomWord() {
  const word = new Uint32Array(1);
  globalThis.crypto.getRandomValues(word);
  return word[0];
}

/** A fresh uniform integer in [0, 2^64), as a BigInt. */
export function random64() {
  const words = new Uint32Array(2);
  globalThis.crypto.getRandomValues(words);
  return (BigInt(words[0]) << 32n) | BigInt(words[1]);
}

export function randomBytes(size) {
  const out = new Uint8Array(size);
  globalThis.crypto.getRandomValues(out);
  return out;
}

/**
 * A uniform integer in [0, m) from uniform ``bits``-bit words ``draw()``, by rejection: words
 * at or above the largest multiple of m below 2^bits are drawn again, so each of the m values
 * comes from exactly floor(2^bits / m) words (exact law; test/krr.test.js enumerates every word
 * for bits = 8). Needs 1 <= m <= 2^bits; fewer than 2 draws on average for any m.
 */
export function uniformBelow(m, draw = randomWord, bits = 32) {
  const span = 2 ** bits;
  const limit = span - (span % m);
  for (;;) {
    const word = draw();
    if (word < limit) return word % m;
  }
}
