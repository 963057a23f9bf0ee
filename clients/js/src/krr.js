// k-randomized response with an exact law from integer draws (docs/browser-client.md).
//
// The report is the true value with probability exactly P / 2^64, else uniform over the k - 1
// other values (a uniform j in [0, k - 1) by rejection, shifted past the true value), where
// P = floor(2^64 * pt * (1 - 2^-48)) and pt = e^eps0 / (e^eps0 + k - 1) as a double. The
// factor (1 - 2^-48) covers the few ulps of error of the double pt, so P / 2^64 < the true pt:
// the mechanism's epsilon, ln(P (k - 1) / (2^64 - P)), is at most eps0 (rounding toward the
// safe side), and below it by about 1e-14 relative.

import { ProtocolError } from './errors.js';
import { random64, uniformBelow, randomWord } from './random.js';

const TWO_64 = 2n ** 64n;

export function checkMechanism(k, eps0) {
  if (!Number.isInteger(k) || k < 2 || k > 2 ** 32) {
    throw new ProtocolError(`k must be an integer in [2, 2^32], got ${k}`);
  }
  if (typeof eps0 !== 'number' || !Number.isFinite(eps0) || !(eps0 > 0)) {
    throw new ProtocolError(`eps0 must be a finite number > 0, got ${eps0}`);
  }
}

/** P of the module comment: the report keeps the true value with probability P / 2^64. */
export function keepNumerator(k, eps0) {
  checkMechanism(k, eps0);
  // pt = 1 / (1 + (k - 1) e^-eps0): no overflow for large eps0.
  const pt = 1 / (1 + (k - 1) * Math.exp(-eps0));
  const shaved = pt * (1 - 2 ** -48);
  // A double times 2^64 is exact; BigInt of its integer part is exact too.
  const numerator = BigInt(Math.floor(shaved * 2 ** 64));
  return numerator >= TWO_64 ? TWO_64 - 1n : numerator;
}

/** The k-RR report of ``value`` in [0, k). ``draw64`` and ``draw32`` are for tests only. */
export function krrReport(value, k, eps0, { draw64 = random64, draw32 = randomWord } = {}) {
  const keep = keepNumerator(k, eps0);
  if (!Number.isInteger(value) || value < 0 || value >= k) {
    throw new ProtocolError(`value must be an integer in [0, k) = [0, ${k}), got ${value}`);
  }
  if (draw64() < keep) return value;
  const other = uniformBelow(k - 1, draw32);
  return other >= value ? other + 1 : other;
}
