// Makes the TypeScript halves of the number vectors with the reference SDK.
//
//   node generate.mjs SDK_DIR OUT_DIR
//
// SDK_DIR: packages/sdk/src of github.com/talosprotocol/talos-sdk-ts compiled
// to JavaScript (core/, crypto/, encoding/), with @noble/ed25519 2.1.0 and
// @noble/hashes 1.4.0 where it resolves them. See README.md.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const [sdk, out] = process.argv.slice(2);
const load = (p) => import(pathToFileURL(join(sdk, p)).href);
const { signCapability, computeCapabilityHash, verifyCapability } = await load('core/capability.js');
const { canonicalize } = await load('encoding/canonical_json.js');
const { fromSeed } = await load('crypto/ed25519.js');

const keys = fromSeed(new Uint8Array(32));
const hex = Buffer.from(keys.publicKey).toString('hex');
// The wire capability's content, whole-number floats written as a JavaScript
// producer has them: 1.0 is the number 1.
const content = {
  v: '1',
  iss: `did:talos:${hex}`,
  sub: 'did:talos:recipient',
  scope: 'tools/call',
  iat: 1700000000.0,
  exp: 1700003600.0,
  constraints: {
    tool: 'weather',
    method: 'get',
    max_calls: 1.0,
    limit: 100.0,
    zero: 0.0,
    negative: -2.0,
    big: 1e16,
    count: 3,
  },
};
const cap = await signCapability(content, keys.privateKey);
if (!(await verifyCapability(cap, keys.publicKey))) throw new Error('the SDK refuses its own capability');
writeFileSync(join(out, 'ts_wire_capability.json'), JSON.stringify(cap, null, 2) + '\n');
writeFileSync(join(out, 'ts_wire_content_canonical.bytes'), canonicalize(content));
writeFileSync(join(out, 'ts_wire_capability_hash.hex'), (await computeCapabilityHash(cap)) + '\n');
// Non-integer numbers have no v1 canonical form: the SDK refuses them.
const refusals = {};
for (const [name, value] of [['ratio', 0.5], ['tiny', 1e-5]]) {
  try {
    canonicalize({ ...content, constraints: { ...content.constraints, [name]: value } });
    refusals[name] = null;
  } catch (e) {
    refusals[name] = e.message;
  }
}
writeFileSync(join(out, 'ts_non_integer_refusals.json'), JSON.stringify(refusals, null, 2) + '\n');
