// libsodium (libsodium-wrappers): sealed boxes (crypto_box_seal) and Ed25519 verification, the
// same primitives as the Python side's PyNaCl. ``await sodiumReady()`` before any use.

import sodiumModule from 'libsodium-wrappers';

let ready = null;

export async function sodiumReady() {
  if (ready === null) ready = sodiumModule.ready.then(() => sodiumModule);
  return ready;
}
