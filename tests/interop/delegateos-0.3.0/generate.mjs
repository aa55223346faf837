// Mints every token shape DelegateOS 0.3.0 can emit, with the package itself,
// into samples.json; tests/interop_delegateos.rs holds dgw's verdict on each.
//
//   node generate.mjs PACKAGE_DIR samples.json
//
// PACKAGE_DIR: the delegate-os 0.3.0 package (its dist/ and node_modules/,
// e.g. github.com/newtro/delegateos at 8cc9e49b with `npm ci --omit=dev
// --ignore-scripts`). Keys are seeds of 32 equal bytes (root 1, alice 2,
// bob 3, carol 4, as tests/support's `seed(n)`). README.md says more.
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const [pkg, out] = process.argv.slice(2);
const load = (p) => import(pathToFileURL(join(pkg, p)).href);
const crypto = await load('dist/core/crypto.js'); // sets @noble/ed25519's sha512
const ed = await load('node_modules/@noble/ed25519/index.js');
const { createDCT, attenuateDCT, verifyDCT } = await load('dist/core/dct.js');
const { createBiscuitDCT, attenuateBiscuitDCT, verifyBiscuitDCT } = await load('dist/core/biscuit.js');
const versions = await load('dist/core/token-version.js');
const { DelegationBroker } = await load('dist/a2a/broker.js');
const { AgentRegistry } = await load('dist/a2a/registry.js');
const { TrustEngine } = await load('dist/core/trust.js');
const { version } = JSON.parse(readFileSync(join(pkg, 'package.json'), 'utf8'));

const keypair = (n) => {
  const privateKey = new Uint8Array(32).fill(n);
  return { principal: { id: crypto.toBase64url(ed.getPublicKey(privateKey)) }, privateKey };
};
const [root, alice, bob, carol] = [1, 2, 3, 4].map(keypair);
const expiresAt = '2099-01-01T00:00:00.000Z';
const now = '2030-01-01T00:00:00.000Z';
const inside = { namespace: 'docs', action: 'read', resource: '/project/src/lib.rs' };
const outside = { namespace: 'mail', action: 'send', resource: '/anyone' };

const created = {
  issuer: root,
  delegatee: alice.principal,
  capabilities: [
    { namespace: 'docs', action: 'read', resource: '/project/**' },
    { namespace: 'web', action: 'search', resource: '*' },
  ],
  contractId: 'ct_0300000000a1',
  delegationId: 'del_0300000000a1',
  parentDelegationId: 'del_000000000000',
  chainDepth: 0,
  maxChainDepth: 3,
  maxBudgetMicrocents: 500000,
  expiresAt,
};
const toBob = {
  attenuator: alice,
  delegatee: bob.principal,
  delegationId: 'del_0300000000b0',
  contractId: 'ct_0300000000a1',
  allowedCapabilities: [{ namespace: 'docs', action: 'read', resource: '/project/src/**' }],
  maxBudgetMicrocents: 1000,
};

// What the package's own verifier says, for the record.
const verdict = (serialized, request) => {
  const context = {
    resource: request.resource,
    operation: request.action,
    namespace: request.namespace,
    now,
    spentMicrocents: 0,
    rootPublicKey: root.principal.id,
  };
  const r = serialized.format === 'delegateos-biscuit-v1'
    ? verifyBiscuitDCT(serialized, context)
    : verifyDCT(serialized, context);
  return r.ok ? { ok: true } : { ok: false, type: r.error.type };
};
const samples = [];
const add = (name, emittedBy, serialized, request = inside) => {
  const entry = { name, emittedBy, serialized, request, referenceVerdict: verdict(serialized, request) };
  if (serialized.format === 'delegateos-sjt-v1') {
    const v = versions.getTokenVersion(serialized);
    entry.referenceVersion = versions.versionString(v);
    entry.referenceCompatible = versions.isCompatible(v, versions.TOKEN_CURRENT_VERSION);
  }
  samples.push(entry);
};

const sjtRoot = createDCT(created);
const sjtBob = attenuateDCT({ ...toBob, token: sjtRoot });
add('sjt_root', 'createDCT', sjtRoot, { namespace: 'docs', action: 'read', resource: '/project/README.md' });
add('sjt_attenuated', 'createDCT + attenuateDCT', sjtBob);
for (const [major, minor] of [[1, 0], [1, 1], [2, 0]]) {
  const stamped = versions.setTokenVersion(sjtBob, { major, minor });
  if (!stamped.ok) throw stamped.error;
  add(`sjt_version_${major}_${minor}`, `setTokenVersion({major: ${major}, minor: ${minor}})`, stamped.value);
}

const broker = new DelegationBroker(new AgentRegistry(), new TrustEngine());
const card = {
  id: 'agent-carol', name: 'carol', description: 'a specialist', principal: carol.principal.id,
  capabilities: [], delegationPolicy: { acceptsDelegation: true, maxChainDepth: 2, requiredTrustScore: 0, allowedNamespaces: ['docs'] },
  signature: '',
};
const contract = {
  id: 'ct_0300000000c0',
  constraints: { requiredCapabilities: ['docs'], maxBudgetMicrocents: 20000, maxChainDepth: 3, deadline: expiresAt },
};
const proposed = broker.proposeDelegation(root, card, contract);
if (!proposed.ok) throw proposed.error;
add('a2a_broker_proposal', 'DelegationBroker.proposeDelegation', proposed.value.dct);

const biscuitRoot = createBiscuitDCT(created);
const biscuitBob = attenuateBiscuitDCT({ ...toBob, token: biscuitRoot });
add('biscuit_root', 'createBiscuitDCT', biscuitRoot, { namespace: 'docs', action: 'read', resource: '/project/README.md' });
add('biscuit_attenuated', 'createBiscuitDCT + attenuateBiscuitDCT', biscuitBob);
// Bob widens his own Biscuit token: the package's attenuation and
// verification accept a block that grants what its parent never did.
const widened = attenuateBiscuitDCT({
  attenuator: bob,
  delegatee: bob.principal,
  delegationId: 'del_0300000000b1',
  contractId: 'ct_0300000000a1',
  allowedCapabilities: [{ namespace: '*', action: '*', resource: '*' }],
  token: biscuitBob,
});
add('biscuit_widened_by_its_holder', 'attenuateBiscuitDCT by the delegatee, granting *:*:*', widened, outside);

writeFileSync(out, JSON.stringify({
  package: `delegate-os ${version}`,
  root: root.principal.id,
  now,
  samples,
}, null, 2) + '\n');

