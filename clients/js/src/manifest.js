// The round manifest (docs/round-manifest.md): read, canonical bytes, digest, signature check.
//
// The canonical bytes are Python's json.dumps(sort_keys=True, separators=(",", ":"),
// ensure_ascii=True) of the manifest object, with eps0, deadline and delta always floats
// (Python's shortest round-trip repr: 4.0, 1e-06, 60.002) and every other number an integer.
// JSON.stringify writes 4 and 1e-6, so this module writes the bytes itself (pythonFloat,
// asciiString). JavaScript numbers hold integers exactly up to 2^53 - 1 only: a manifest with a
// larger integer (a round id past 2^53 - 1) is refused, never rounded.

import { concat, fromHex, toHex } from './bytes.js';
import { ProtocolError } from './errors.js';
import { checkBoxKey, KEY_SIZE } from './onion.js';

const text = new TextEncoder();
export const DOMAIN_DIGEST = text.encode('shuffledp/manifest-digest/v1\0');
export const DOMAIN_SIGNATURE = text.encode('shuffledp/manifest-signature/v1\0');
export const FORMAT = 'shuffledp-round-manifest';
export const WIRE_VERSION = 2;
const FLOAT_FIELDS = new Set(['eps0', 'deadline', 'delta']);
const FIELDS = [
  'analyzer', 'client_auth', 'clients', 'colluders', 'coordinator', 'deadline', 'delta',
  'eps0', 'expected', 'hops', 'k', 'labels', 'min_batch', 'prefix', 'protocol_version', 'rounds',
];

/** Python's repr of a finite double: shortest round-trip digits, fixed notation for decimal
 * exponents in [-4, 16) (with ".0" if integral), else d.ddde-XX with at least two exponent
 * digits. */
export function pythonFloat(x) {
  if (typeof x !== 'number' || !Number.isFinite(x)) {
    throw new ProtocolError(`a manifest float must be finite, got ${x}`);
  }
  if (x === 0) return Object.is(x, -0) ? '-0.0' : '0.0';
  const sign = x < 0 ? '-' : '';
  const [mantissa, exp] = Math.abs(x).toExponential().split('e');
  const digits = mantissa.replace('.', '');
  const e = Number(exp);
  if (e < -4 || e >= 16) {
    const body = digits.length > 1 ? `${digits[0]}.${digits.slice(1)}` : digits;
    const magnitude = String(Math.abs(e)).padStart(2, '0');
    return `${sign}${body}e${e < 0 ? '-' : '+'}${magnitude}`;
  }
  if (e < 0) return `${sign}0.${'0'.repeat(-e - 1)}${digits}`;
  const whole = digits.slice(0, e + 1).padEnd(e + 1, '0');
  const fraction = digits.slice(e + 1);
  return `${sign}${whole}.${fraction || '0'}`;
}

/** A JSON string as Python's json.dumps(ensure_ascii=True) writes it. */
export function asciiString(value) {
  const short = { '"': '\\"', '\\': '\\\\', '\n': '\\n', '\r': '\\r', '\t': '\\t', '\b': '\\b', '\f': '\\f' };
  let out = '"';
  for (let i = 0; i < value.length; i += 1) {
    const ch = value[i];
    const code = value.charCodeAt(i);
    if (short[ch]) out += short[ch];
    else if (code < 0x20 || code > 0x7e) out += `\\u${code.toString(16).padStart(4, '0')}`;
    else out += ch;
  }
  return `${out}"`;
}

function canonical(value, floatField) {
  if (floatField) return pythonFloat(value);
  if (typeof value === 'string') return asciiString(value);
  if (typeof value === 'boolean') return value ? 'true' : 'false';
  if (typeof value === 'number') {
    if (!Number.isSafeInteger(value)) {
      throw new ProtocolError(
        `a manifest integer must be below 2^53 for this client (JavaScript numbers), got ${value}`,
      );
    }
    return String(value);
  }
  if (Array.isArray(value)) return `[${value.map((item) => canonical(item, false)).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const keys = Object.keys(value).sort();
    return `{${keys.map((key) => `${asciiString(key)}:${canonical(value[key], false)}`).join(',')}}`;
  }
  throw new ProtocolError(`a manifest value must be JSON, got ${String(value)}`);
}

/** The canonical bytes of a manifest object (the "manifest" member of the file). */
export function canonicalBytes(manifest) {
  const keys = Object.keys(manifest).sort();
  const body = keys.map((key) => `${asciiString(key)}:${canonical(manifest[key], FLOAT_FIELDS.has(key))}`);
  return text.encode(`{${body.join(',')}}`);
}

export async function sha256(bytes) {
  return new Uint8Array(await globalThis.crypto.subtle.digest('SHA-256', bytes));
}

function field(name, ok, value, rule) {
  if (!ok) throw new ProtocolError(`manifest field ${name} must be ${rule}, got ${JSON.stringify(value)?.slice(0, 80)}`);
}

function integer(name, value, low, high = Number.MAX_SAFE_INTEGER) {
  field(name, Number.isSafeInteger(value) && value >= low && value <= high, value, `an integer in [${low}, ${high}]`);
  return value;
}

function stageKeys(sodium, name, stage) {
  field(name, stage !== null && typeof stage === 'object' && !Array.isArray(stage), stage, 'an object {box, sign}');
  const box = fromHex(stage.box, KEY_SIZE, `manifest field ${name}.box`);
  checkBoxKey(sodium, box, `manifest field ${name}.box`);
  return { box, sign: fromHex(stage.sign, KEY_SIZE, `manifest field ${name}.sign`) };
}

/** What a client uses of a manifest object, each field checked (a ProtocolError names it). */
function checkedFields(sodium, m) {
  const missing = FIELDS.filter((key) => !(key in m));
  const extra = Object.keys(m).filter((key) => !FIELDS.includes(key));
  if (missing.length || extra.length) {
    throw new ProtocolError(`manifest must have exactly its fields: missing [${missing}], unknown [${extra}]`);
  }
  integer('protocol_version', m.protocol_version, WIRE_VERSION, WIRE_VERSION);
  field('prefix', typeof m.prefix === 'string' && m.prefix.length > 0, m.prefix, 'a topic prefix');
  field('rounds', Array.isArray(m.rounds) && m.rounds.length > 0, m.rounds, 'a non-empty list of round ids');
  m.rounds.forEach((round) => integer('rounds', round, 0));
  const k = integer('k', m.k, 2, 2 ** 32);
  field('eps0', typeof m.eps0 === 'number' && Number.isFinite(m.eps0) && m.eps0 > 0, m.eps0, 'a finite number > 0');
  field('labels', Array.isArray(m.labels) && m.labels.length === k, m.labels, `${k} labels`);
  field('hops', Array.isArray(m.hops) && m.hops.length >= 1 && m.hops.length <= 64, m.hops, 'a list of 1 to 64 hops');
  field('clients', Array.isArray(m.clients) && m.clients.length >= 1, m.clients, 'a non-empty list');
  m.clients.forEach((count) => integer('clients', count, 1, 2 ** 32));
  integer('expected', m.expected, 1);
  field('client_auth', typeof m.client_auth === 'boolean', m.client_auth, 'true or false');
  return {
    prefix: m.prefix,
    rounds: m.rounds.map(BigInt),
    k,
    eps0: m.eps0,
    labels: m.labels,
    hops: m.hops.map((hop, i) => stageKeys(sodium, `hops[${i}]`, hop)),
    analyzer: stageKeys(sodium, 'analyzer', m.analyzer),
    clients: m.clients,
    clientAuth: m.client_auth,
    expected: m.expected,
    coordinator: fromHex(m.coordinator, KEY_SIZE, 'manifest field coordinator'),
  };
}

/**
 * The manifest in the file text ``fileText``, verified: its fields are well formed, it names
 * the coordinator key the reader trusts (``trustedCoordinator``, 32 bytes or 64 hex characters,
 * from the reader's own configuration, never from the file), and its Ed25519 signature of
 * DOMAIN_SIGNATURE | canonical bytes verifies with that key. Returns the fields the client uses
 * and ``digest`` (SHA-256 of DOMAIN_DIGEST | canonical bytes). ProtocolError otherwise.
 */
export async function loadManifest(sodium, fileText, trustedCoordinator) {
  const trusted = typeof trustedCoordinator === 'string'
    ? fromHex(trustedCoordinator, KEY_SIZE, 'trusted coordinator key') : trustedCoordinator;
  if (!(trusted instanceof Uint8Array) || trusted.length !== KEY_SIZE) {
    throw new ProtocolError(`trusted coordinator key must be ${KEY_SIZE} bytes`);
  }
  let document;
  try {
    document = JSON.parse(fileText);
  } catch (error) {
    throw new ProtocolError(`manifest file must be JSON: ${error.message}`);
  }
  if (document?.format !== FORMAT || document?.version !== 1 || typeof document.manifest !== 'object') {
    throw new ProtocolError(`manifest file must have format '${FORMAT}' version 1 and a manifest`);
  }
  const signature = fromHex(document.signature, 64, 'manifest signature');
  const fields = checkedFields(sodium, document.manifest);
  if (toHex(fields.coordinator) !== toHex(trusted)) {
    throw new ProtocolError(
      `manifest must be signed by the trusted coordinator key ${toHex(trusted).slice(0, 16)}..., it names ${toHex(fields.coordinator).slice(0, 16)}...`,
    );
  }
  const bytes = canonicalBytes(document.manifest);
  if (!sodium.crypto_sign_verify_detached(signature, concat(DOMAIN_SIGNATURE, bytes), trusted)) {
    throw new ProtocolError(
      'manifest signature must verify with the coordinator key, it does not (the file was changed after it was signed, or signed by another key)',
    );
  }
  return { ...fields, digest: await sha256(concat(DOMAIN_DIGEST, bytes)), canonical: bytes };
}
