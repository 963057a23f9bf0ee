// The randomizer's law: exact integer sampling (enumerated), and a chi-square test of k-RR.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { keepNumerator, krrReport, uniformBelow } from '../src/index.js';

test('uniformBelow is exact: with 8-bit words every value comes from exactly floor(256/m) words', () => {
  for (let m = 1; m <= 256; m += 1) {
    const counts = new Array(m).fill(0);
    for (let word = 0; word < 256; word += 1) {
      // one call per word; a rejected word asks for another draw, which we refuse to give
      let given = false;
      const draw = () => { if (given) throw new Error('rejected'); given = true; return word; };
      try { counts[uniformBelow(m, draw, 8)] += 1; } catch { /* word rejected */ }
    }
    const each = Math.floor(256 / m);
    assert.deepEqual(counts, new Array(m).fill(each), `m = ${m}`);
  }
});

test('the keep probability P / 2^64 is below pt and its epsilon at most eps0 (safe side)', () => {
  for (const [k, eps0] of [[2, 0.1], [5, 1], [15, 4], [1000, 8], [2 ** 32, 20]]) {
    const p = keepNumerator(k, eps0);
    const keep = Number(p) / 2 ** 64;
    const eps = Math.log(keep * (k - 1) / (1 - keep));
    assert.ok(eps <= eps0, `k=${k} eps0=${eps0}: eps ${eps}`);
    assert.ok(eps0 - eps < 1e-10, `k=${k} eps0=${eps0}: eps ${eps} too far below`);
  }
});

// Chi-square goodness of fit of 200,000 reports of value 1 with k = 6, eps0 = 1 against
// the law (pt for 1, pb for each other). False-alarm rate 1e-6: the critical value 35.888 is
// the 1 - 1e-6 quantile of chi-square with 5 degrees of freedom (scipy.stats.chi2.isf(1e-6, 5)
// = 35.888186879672865).
test('k-RR reports follow the k-RR law (chi-square, false-alarm rate 1e-6)', () => {
  const k = 6; const eps0 = 1; const n = 200_000; const truth = 1;
  const counts = new Array(k).fill(0);
  for (let i = 0; i < n; i += 1) counts[krrReport(truth, k, eps0)] += 1;
  const pt = Math.exp(eps0) / (Math.exp(eps0) + k - 1);
  const pb = 1 / (Math.exp(eps0) + k - 1);
  const stat = counts.reduce((sum, count, j) => {
    const expected = n * (j === truth ? pt : pb);
    return sum + (count - expected) ** 2 / expected;
  }, 0);
  assert.ok(stat < 35.888186879672865, `chi-square ${stat} for counts ${counts}`);
});

test('a value outside [0, k) and bad k or eps0 are refused with the rule', () => {
  assert.throws(() => krrReport(6, 6, 1), /value must be an integer in \[0, k\) = \[0, 6\), got 6/);
  assert.throws(() => krrReport(0, 1, 1), /k must be an integer in \[2, 2\^32\], got 1/);
  assert.throws(() => krrReport(0, 3, -1), /eps0 must be a finite number > 0, got -1/);
});
