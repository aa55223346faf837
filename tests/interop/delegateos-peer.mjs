// A DelegateOS peer written against the TypeScript reference's libraries
// (@noble/ed25519, blakejs, canonicalize), following the spec's algorithms
// (§3.3, §3.4, §3.5, §4.1, §10.1 step 3). The Rust tests use it to prove that
// tokens minted there verify in dgw and tokens minted by dgw verify there.
//
//   node delegateos-peer.mjs mint        < {root, authority, attenuations:[{seed, block}]}
//   node delegateos-peer.mjs verify      < {token, root}
//   node delegateos-peer.mjs revocation  < {seed, revocationId, revokedAt, scope}
//   node delegateos-peer.mjs sign        < {seed, value}   (any DelegateOS structure)
//
// Seeds are base64url of 32 bytes. Output is one JSON object on stdout.
import * as ed from '@noble/ed25519';
import blake from 'blakejs';
import canonicalize from 'canonicalize';

const b64u = {
  encode: (bytes) => Buffer.from(bytes).toString('base64url'),
  decode: (text) => new Uint8Array(Buffer.from(text, 'base64url')),
};
const digest = (value) => blake.blake2b(new TextEncoder().encode(canonicalize(value)), undefined, 32);
const principal = async (seed) => b64u.encode(await ed.getPublicKeyAsync(b64u.decode(seed)));
const sign = async (seed, value) => b64u.encode(await ed.signAsync(digest(value), b64u.decode(seed)));
const verify = async (id, value, sig) => {
  try {
    return await ed.verifyAsync(b64u.decode(sig), digest(value), b64u.decode(id));
  } catch {
    return false;
  }
};

async function mint({ root, authority, attenuations = [] }) {
  const auth = { ...authority, issuer: await principal(root) };
  const token = {
    format: 'delegateos-sjt-v1',
    authority: auth,
    attenuations: [],
    signatures: [{ signer: auth.issuer, signature: await sign(root, { authority: auth }), covers: 'authority' }],
  };
  for (const { seed, block } of attenuations) {
    const att = { ...block, attenuator: await principal(seed) };
    token.attenuations.push(att);
    const signature = await sign(seed, { authority: auth, attenuations: token.attenuations });
    token.signatures.push({ signer: att.attenuator, signature, covers: token.attenuations.length - 1 });
  }
  return { token: b64u.encode(new TextEncoder().encode(canonicalize(token))) };
}

async function verifyToken({ token, root }) {
  const t = JSON.parse(Buffer.from(token, 'base64url').toString('utf8'));
  const problems = [];
  if (t.authority.issuer !== root) problems.push('issuer is not the root');
  if (!(await verify(t.authority.issuer, { authority: t.authority }, t.signatures[0].signature))) {
    problems.push('authority signature');
  }
  for (let i = 0; i < t.attenuations.length; i++) {
    const payload = { authority: t.authority, attenuations: t.attenuations.slice(0, i + 1) };
    if (!(await verify(t.attenuations[i].attenuator, payload, t.signatures[i + 1].signature))) {
      problems.push(`attenuation ${i} signature`);
    }
  }
  const revocationIds = [t.authority, ...t.attenuations].map((b) => b64u.encode(digest(b)));
  return { valid: problems.length === 0, problems, revocationIds };
}

async function revocation({ seed, revocationId, revokedAt, scope }) {
  const entry = { revocationId, revokedBy: await principal(seed), revokedAt, scope };
  return { ...entry, signature: await sign(seed, entry) };
}

async function signValue({ seed, value }) {
  const { signature: _drop, ...unsigned } = value;
  return { ...unsigned, signature: await sign(seed, unsigned) };
}

const commands = { mint, verify: verifyToken, revocation, sign: signValue };
const command = commands[process.argv[2]];
if (!command) {
  console.error(`usage: node delegateos-peer.mjs ${Object.keys(commands).join('|')} < input.json`);
  process.exit(2);
}
const chunks = [];
for await (const chunk of process.stdin) chunks.push(chunk);
const output = await command(JSON.parse(Buffer.concat(chunks).toString('utf8')));
process.stdout.write(JSON.stringify(output) + '\n');
