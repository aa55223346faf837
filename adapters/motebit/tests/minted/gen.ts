// Mints Motebit artifacts with the reference's own signers, asks the
// reference's verdict producers, and prints [{case, expected}] for dgw.
import * as ed from "@noble/ed25519";
import { sha512 } from "@noble/hashes/sha2.js";
import {
  signExecutionReceipt, signDelegation, signStandingDelegation, signDelegationRevocation,
  verifyReceiptVerdict, verifyDelegationTokenVerdict, deriveSovereignMotebitId, bytesToHex,
} from "./packages/crypto/src/index.ts";

ed.hashes.sha512 = sha512;
const seed = (n: number) => new Uint8Array(32).fill(n);
const pub = async (n: number) => await ed.getPublicKeyAsync(seed(n));
const hex = async (n: number) => bytesToHex(await pub(n));
const sha = async (s: string) => bytesToHex(new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(s))));
function didKey(pk: Uint8Array) {
  const A = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz";
  const b = new Uint8Array([0xed, 0x01, ...pk]);
  let v = 0n; for (const x of b) v = v * 256n + BigInt(x);
  let out = ""; while (v > 0n) { out = A[Number(v % 58n)] + out; v /= 58n; }
  return "did:key:z" + out;
}
const cases: any[] = [];
const NOW = 1_750_000_000_000;

async function receipt(n: number, edit: (r: any) => void = () => {}, post: (r: any) => void = () => {}) {
  const result = `result ${n}`;
  const r: any = {
    task_id: `t-${cases.length}`, motebit_id: await deriveSovereignMotebitId(await hex(n)), device_id: "dev",
    submitted_at: NOW, completed_at: NOW + 5, status: "completed", result, tools_used: ["x"],
    memories_formed: 0, prompt_hash: await sha("p"), result_hash: await sha(result),
  };
  edit(r);
  const signed: any = { ...(await signExecutionReceipt(r, seed(n), await pub(n))) };
  post(signed);
  cases.push({ name: `receipt-${cases.length}`, kind: "receipt", input: { receipt: signed },
    expected: await verifyReceiptVerdict(signed) });
}

await receipt(1);
await receipt(2, (r) => { r.motebit_id = "not-sovereign"; });
await receipt(3, async () => {}, () => {});
await receipt(4, (r) => { r.result_hash = "00".repeat(32); });
await receipt(5, () => {}, (r) => { r.result = "tampered"; });
await receipt(6, () => {}, (r) => { r.suite = "motebit-jcs-ed25519-hex-v1"; });
await receipt(7, () => {}, (r) => { delete r.public_key; });
await receipt(8, () => {}, (r) => { r.public_key = "zz".repeat(32); });
await receipt(9, () => {}, (r) => { r.public_key = "ab"; });
await receipt(10, (r) => { r.status = "failed"; r.motebit_id = r.motebit_id.toUpperCase(); });
await receipt(11, async () => {}, (r) => { r.signature = r.signature.slice(0, -4) + "AAAA"; });
const did11 = didKey(await pub(12));
await receipt(12, (r) => { r.motebit_id = did11; });



async function tick(opts: {
  grant?: (g: any) => void, token?: (t: any) => void, post?: (t: any) => void,
  options?: any, revokeBy?: number, delegatorDid?: boolean,
}) {
  const d = 1, del = 2;
  const delegatorId = opts.delegatorDid ? didKey(await pub(d)) : await deriveSovereignMotebitId(await hex(d));
  const g: any = {
    grant_id: "g-1", delegator_id: delegatorId, delegator_public_key: await hex(d),
    delegate_id: "delegate", delegate_public_key: await hex(del), scope: "a,b", subject: "s",
    cadence_ms: 1000, issued_at: NOW - 1000, not_before: null, expires_at: NOW + 86_400_000,
    max_token_ttl_ms: 3_600_000,
  };
  opts.grant?.(g);
  const grant = await signStandingDelegation(g, seed(d));
  const t: any = {
    delegator_id: delegatorId, delegator_public_key: await hex(d), delegate_id: "delegate",
    delegate_public_key: await hex(del), scope: "a", grant_id: "g-1", issued_at: NOW, expires_at: NOW + 3_600_000,
  };
  opts.token?.(t);
  const token: any = { ...(await signDelegation(t, seed(d))) };
  opts.post?.(token);
  const options: any = { now: NOW, ...(opts.options ?? {}) };
  if (opts.revokeBy !== undefined) {
    const rev = await signDelegationRevocation({ grant_id: "g-1", delegator_id: delegatorId,
      delegator_public_key: await hex(opts.revokeBy), revoked_at: NOW }, seed(opts.revokeBy));
    options.revocations = [rev];
  }
  cases.push({ name: `token-${cases.length}`, kind: "delegation_token", input: { token, grant, options },
    expected: await verifyDelegationTokenVerdict(token, grant, options) });
}

await tick({});
await tick({ options: { revocations: [] } });
await tick({ options: { revocations: [], revocationFreshness: { basis: "stapled", asOf: { timestamp_ms: NOW } } } });
await tick({ revokeBy: 1 });
await tick({ revokeBy: 3 });
await tick({ token: (t) => { t.scope = "a,c"; } });
await tick({ token: (t) => { t.scope = "*"; } });
await tick({ grant: (g) => { g.scope = "*"; }, token: (t) => { t.scope = "*"; } });
await tick({ token: (t) => { t.expires_at = NOW + 3_600_001; } });
await tick({ token: (t) => { t.issued_at = NOW - 7_200_000; t.expires_at = NOW - 1; } });
await tick({ token: (t) => { t.issued_at = NOW - 7_200_000; t.expires_at = NOW - 1; }, options: { temporalMode: "ordering" } });
await tick({ token: (t) => { t.not_before = NOW + 10; t.issued_at = NOW + 10; t.expires_at = NOW + 100; } });
await tick({ token: (t) => { t.expires_at = NOW; } });
await tick({ token: (t) => { t.grant_id = "g-2"; } });
await tick({ token: (t) => { t.delegate_id = "other"; } });
await tick({ grant: (g) => { g.expires_at = NOW - 1; } });
await tick({ grant: (g) => { g.expires_at = NOW - 1; }, options: { temporalMode: "ordering" } });
await tick({ grant: (g) => { g.not_before = NOW + 1; } });
await tick({ post: (t) => { t.scope = "b"; } });
await tick({ post: (t) => { t.suite = "x"; } });
await tick({ delegatorDid: true });
await tick({ token: (t) => { t.delegator_id = "plain-id"; }, grant: (g) => { g.delegator_id = "plain-id"; } });
await tick({ post: (t) => { t.delegator_public_key = t.delegator_public_key.toUpperCase(); } });
process.stdout.write(JSON.stringify(cases));
