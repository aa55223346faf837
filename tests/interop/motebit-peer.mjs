// A Motebit peer written from the texts (execution-ledger §11.2–§11.5,
// auth-token §4), on the libraries the reference uses (@noble/ed25519, a
// JCS canonicalizer): the Rust tests use it to prove that receipts and
// bearer tokens minted here verify in dgw, and receipts minted by dgw
// verify here. The reference's own crypto package is not on npm.
//
//   node motebit-peer.mjs verify        < receipt         → {valid, errors}
//   node motebit-peer.mjs sign-receipt  < {seed, receipt}  → receipt
//   node motebit-peer.mjs bearer        < {seed, payload}  → {token}
//
// Seeds are one byte, repeated 32 times (as the Rust tests' keys).
import { createHash } from 'node:crypto';
import * as ed from '@noble/ed25519';
import canonicalize from 'canonicalize';

const SUITE = 'motebit-jcs-ed25519-b64-v1';
const b64u = (bytes) => Buffer.from(bytes).toString('base64url');
const fromB64u = (text) => new Uint8Array(Buffer.from(text, 'base64url'));
const hex = (bytes) => Buffer.from(bytes).toString('hex');
const sha256Hex = (text) => createHash('sha256').update(text, 'utf8').digest('hex');
const seedOf = (n) => new Uint8Array(32).fill(n);
const body = (artifact) => {
  const { signature, ...rest } = artifact;
  return new TextEncoder().encode(canonicalize(rest));
};

// §11.3 with §11.4's binding, the suite (§11.1) and §11.5's recursion.
async function verify(receipt, depth = 0, errors = []) {
  const where = receipt.task_id ?? '?';
  if (depth > 10) errors.push(`${where}: nested deeper than 10`);
  if (receipt.suite !== SUITE) errors.push(`${where}: suite`);
  if (!/^[0-9a-f]{64}$/.test(receipt.public_key ?? '')) errors.push(`${where}: public_key`);
  else {
    let sig;
    try {
      sig = fromB64u(receipt.signature);
    } catch {
      sig = new Uint8Array();
    }
    let ok = false;
    try {
      ok = sig.length === 64 && (await ed.verifyAsync(sig, body(receipt), receipt.public_key));
    } catch {
      ok = false;
    }
    if (!ok) errors.push(`${where}: signature`);
  }
  if (sha256Hex(receipt.result ?? '') !== receipt.result_hash) errors.push(`${where}: result_hash`);
  if (!['completed', 'failed', 'denied'].includes(receipt.status)) errors.push(`${where}: status`);
  for (const child of receipt.delegation_receipts ?? []) await verify(child, depth + 1, errors);
  return errors;
}

async function signReceipt({ seed, receipt }) {
  const key = seedOf(seed);
  const signed = { ...receipt, public_key: hex(await ed.getPublicKeyAsync(key)), suite: SUITE };
  signed.signature = b64u(await ed.signAsync(body(signed), key));
  return signed;
}

async function bearer({ seed, payload }) {
  const bytes = new TextEncoder().encode(JSON.stringify(payload));
  return { token: `${b64u(bytes)}.${b64u(await ed.signAsync(bytes, seedOf(seed)))}` };
}

const input = JSON.parse(await new Promise((resolve) => {
  let text = '';
  process.stdin.on('data', (d) => (text += d));
  process.stdin.on('end', () => resolve(text));
}));
const command = process.argv[2];
let out;
if (command === 'verify') {
  const errors = await verify(input);
  out = { valid: errors.length === 0, errors };
} else if (command === 'sign-receipt') out = await signReceipt(input);
else if (command === 'bearer') out = await bearer(input);
else throw new Error(`unknown command ${command}`);
process.stdout.write(JSON.stringify(out));
