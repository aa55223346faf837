// Mints Motebit artifacts with the reference's own signers, asks the
// reference's verdict producers, and prints [{case, expected}] for dgw.
import * as ed from "@noble/ed25519";
import { sha512 } from "@noble/hashes/sha2.js";
import {
  signExecutionReceipt, signDelegation, signStandingDelegation, signDelegationRevocation,
  verifyReceiptVerdict, verifyDelegationTokenVerdict, deriveSovereignMotebitId, bytesToHex,
} from "./packages/crypto/src/index.ts";
import { canonicalJson, toBase64Url } from "./packages/crypto/src/signing.ts";

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

// ---------------------------------------------------------------------------
// Inputs off the schemas (issue 31): members missing (removed after signing,
// or a validly signed body that never had them), of another type, unknown,
// encoded otherwise. The reference's producers type their input but check
// none of it: each case records the verdict it gives, or `throws` where it
// throws; `dgw_refuses` marks the inputs dgw declares not the artifact's
// shape at all (a part that is not a JSON object) although the reference,
// reading members of anything, answers.
// ---------------------------------------------------------------------------
const signRaw = async (body: any, n: number) =>
  ({ ...body, signature: toBase64Url(await ed.signAsync(new TextEncoder().encode(canonicalJson(body)), seed(n))) });
async function baseReceipt(n: number) {
  const result = `result ${n}`;
  return { task_id: `t-${cases.length}`, motebit_id: await deriveSovereignMotebitId(await hex(n)), device_id: "dev",
    submitted_at: NOW, completed_at: NOW + 5, status: "completed", result, tools_used: ["x"],
    memories_formed: 0, prompt_hash: await sha("p"), result_hash: await sha(result), public_key: await hex(n),
    suite: "motebit-jcs-ed25519-b64-v1" } as any;
}
function judged(name: string, kind: string, input: any, run: () => Promise<any>, dgwRefuses?: string) {
  return run().then(
    (expected) => cases.push({ name, kind, input, expected, ...(dgwRefuses ? { dgw_refuses: dgwRefuses } : {}) }),
    (e) => cases.push({ name, kind, input, expected: null, throws: String(e?.message ?? e) }),
  );
}
// A receipt: `edit` its body, sign it as is (`signed`: false leaves the
// signature of the body before `post`), then `post` the signed copy.
async function offReceipt(label: string, n: number, edit: (r: any) => void | Promise<void>, post: (r: any) => void = () => {}) {
  const r = await baseReceipt(n);
  await edit(r);
  const signed: any = { ...(await signRaw(r, n)) };
  post(signed);
  await judged(`off-receipt-${label}`, "receipt", { receipt: signed }, () => verifyReceiptVerdict(signed));
}
const del = (f: string) => (r: any) => { delete r[f]; };
const set = (f: string, v: any) => (r: any) => { r[f] = v; };
await offReceipt("suite-removed-after-signing", 21, () => {}, del("suite"));
await offReceipt("suite-never-signed", 22, del("suite"));
await offReceipt("suite-a-number", 23, set("suite", 1));
await offReceipt("task_id-removed-after-signing", 24, () => {}, del("task_id"));
for (const f of ["task_id", "motebit_id", "device_id", "submitted_at", "completed_at", "status", "tools_used", "memories_formed", "prompt_hash"])
  await offReceipt(`${f}-never-signed`, 25, del(f));
await offReceipt("result-never-signed-hash-of-empty", 26, async (r) => { delete r.result; r.result_hash = await sha(""); });
await offReceipt("result_hash-never-signed", 27, del("result_hash"));
await offReceipt("task_id-a-number", 28, set("task_id", 7));
await offReceipt("task_id-empty", 28, set("task_id", ""));
await offReceipt("status-unknown", 29, set("status", "exploded"));
await offReceipt("status-null", 29, set("status", null));
await offReceipt("memories-negative-fraction", 30, set("memories_formed", -1.5));
await offReceipt("tools_used-a-string", 30, set("tools_used", "x"));
await offReceipt("submitted_at-a-string", 31, set("submitted_at", "soon"));
await offReceipt("completed-before-submitted", 31, set("completed_at", NOW - 5));
await offReceipt("prompt_hash-not-hex", 32, set("prompt_hash", "not a hash"));
await offReceipt("result-a-number", 33, async (r) => { r.result = 42; r.result_hash = await sha("42"); });
await offReceipt("result-an-array", 33, async (r) => { r.result = [1, [2, null], "a"]; r.result_hash = await sha("1,2,,a"); });
await offReceipt("result-an-object", 33, async (r) => { r.result = { a: 1 }; r.result_hash = await sha("[object Object]"); });
await offReceipt("result-a-number-unbound", 33, set("result", 42));
await offReceipt("unknown-member", 34, set("extra", { nested: [1, 2] }));
await offReceipt("source_digest-malformed", 34, set("source_digest", "sha-256:abc"));
await offReceipt("invocation_origin-unknown", 34, set("invocation_origin", "telepathy"));
await offReceipt("delegation_receipts-not-receipts", 35, set("delegation_receipts", [42, { task_id: 1 }]));
await offReceipt("delegation_receipts-an-object", 35, set("delegation_receipts", { a: 1 }));
await offReceipt("public_key-a-number", 36, set("public_key", 1));
await offReceipt("public_key-empty", 36, set("public_key", ""));
await offReceipt("public_key-an-array", 36, set("public_key", ["ab"]));
await offReceipt("public_key-an-object", 36, set("public_key", { k: 1 }));
await offReceipt("public_key-65-digits", 37, async (r) => { r.public_key = r.public_key + "0"; });
await offReceipt("public_key-63-digits", 37, async (r) => { r.public_key = r.public_key.slice(0, 63); });
await offReceipt("public_key-odd-digits-parse", 37, async (r) => { r.public_key = " " + r.public_key.slice(1); });
await offReceipt("signature-standard-base64-padded", 38, () => {}, (r) => {
  r.signature = r.signature.replace(/-/g, "+").replace(/_/g, "/") + "=="; });
await offReceipt("signature-with-spaces", 38, () => {}, (r) => { r.signature = r.signature.slice(0, 10) + " \n" + r.signature.slice(10); });
await offReceipt("signature-a-number", 38, () => {}, set("signature", 12));
await offReceipt("signature-removed", 38, () => {}, del("signature"));
await offReceipt("motebit_id-a-number", 39, set("motebit_id", 39));
await offReceipt("motebit_id-upper-did-key-prefix", 39, set("motebit_id", "DID:KEY:z6Mk"));

// Delegation tokens (ticks) and grants off the schemas.
async function offTick(label: string, o: {
  token?: (t: any) => void, post?: (t: any) => void, grant?: (g: any) => void, grantPost?: (g: any) => void,
  options?: any, noGrant?: boolean, raw?: boolean,
}) {
  const d = 1, dl = 2;
  const delegatorId = await deriveSovereignMotebitId(await hex(d));
  const g: any = {
    grant_id: "g-1", delegator_id: delegatorId, delegator_public_key: await hex(d),
    delegate_id: "delegate", delegate_public_key: await hex(dl), scope: "a,b", subject: "s",
    cadence_ms: 1000, issued_at: NOW - 1000, not_before: null, expires_at: NOW + 86_400_000,
    max_token_ttl_ms: 3_600_000, suite: "motebit-jcs-ed25519-b64-v1",
  };
  o.grant?.(g);
  const grant: any = { ...(await signRaw(g, d)) };
  o.grantPost?.(grant);
  const t: any = {
    delegator_id: delegatorId, delegator_public_key: await hex(d), delegate_id: "delegate",
    delegate_public_key: await hex(dl), scope: "a", grant_id: "g-1", issued_at: NOW, expires_at: NOW + 3_600_000,
    suite: "motebit-jcs-ed25519-b64-v1",
  };
  o.token?.(t);
  const token: any = { ...(await signRaw(t, d)) };
  o.post?.(token);
  const options = o.options ?? { now: NOW };
  const input: any = { token, grant, options };
  await judged(`off-token-${label}`, "delegation_token", input, () => verifyDelegationTokenVerdict(token, grant, options));
}
const revoke = async (body: any, n: number) => signRaw({ grant_id: "g-1", delegator_id: await deriveSovereignMotebitId(await hex(1)),
  delegator_public_key: await hex(1), revoked_at: NOW, suite: "motebit-jcs-ed25519-b64-v1", ...body }, n);
await offTick("suite-removed-after-signing", { post: del("suite") });
await offTick("suite-never-signed", { token: del("suite") });
await offTick("grant_id-removed-after-signing", { post: del("grant_id") });
await offTick("delegator_id-never-signed", { token: del("delegator_id") });
await offTick("grant_id-never-signed", { token: del("grant_id") });
await offTick("issued_at-never-signed", { token: del("issued_at") });
await offTick("expires_at-never-signed", { token: del("expires_at") });
await offTick("not_before-null", { token: set("not_before", null) });
await offTick("expires_at-a-string", { token: set("expires_at", "later") });
await offTick("expires_at-a-numeric-string", { token: set("expires_at", String(NOW - 1)) });
await offTick("issued_at-an-object", { token: set("issued_at", {}) });
await offTick("scope-empty", { token: set("scope", "") });
await offTick("scope-padded", { token: set("scope", " a ,\u00a0b\ufeff") });
await offTick("scope-a-number", { token: set("scope", 5) });
await offTick("scope-a-number-another-grant", { token: (t) => { t.scope = 5; t.grant_id = "g-2"; } });
await offTick("unknown-member", { token: set("extra", true) });
await offTick("delegator_public_key-an-array", { token: set("delegator_public_key", ["ab"]) });
await offTick("delegator_public_key-upper-padded", { post: (t) => { t.delegator_public_key = " " + t.delegator_public_key.toUpperCase().slice(1); } });
await offTick("signature-standard-base64-padded", { post: (t) => {
  t.signature = t.signature.replace(/-/g, "+").replace(/_/g, "/") + "=="; } });
await offTick("grant-suite-never-signed", { grant: del("suite") });
await offTick("grant-scope-never-signed", { grant: del("scope") });
await offTick("grant-expires_at-never-signed", { grant: del("expires_at") });
await offTick("grant-ttl-a-numeric-string", { grant: set("max_token_ttl_ms", "3599999") });
await offTick("grant-not_before-a-string", { grant: set("not_before", "x") });
await offTick("grant-unknown-member", { grant: set("extra", [1]) });
await offTick("grant-spend-ceiling", { grant: set("spend_ceiling", { schema: "motebit.spend-ceiling.v1", lifetime_limit_micro: 5_000 }) });
await offTick("grant-spend-ceiling-stripped", { grant: set("spend_ceiling", { schema: "motebit.spend-ceiling.v1", lifetime_limit_micro: 5_000 }), grantPost: del("spend_ceiling") });
await offTick("grant-signature-a-number", { grantPost: set("signature", 3) });
await offTick("options-temporalMode-unknown", { options: { now: NOW, temporalMode: "sundial" } });
await offTick("options-now-a-string", { options: { now: String(NOW + 3_600_001) } });
await offTick("options-now-not-a-number", { options: { now: "noon" } });
await offTick("options-unknown-member", { options: { now: NOW, extra: 1 } });
await offTick("options-revocations-a-string", { options: { now: NOW, revocations: "g-1" } });
await offTick("options-revocations-empty-string", { options: { now: NOW, revocations: "" } });
await offTick("options-revocations-primitives", { options: { now: NOW, revocations: [1, "g-1", {}, []] } });
await offTick("options-revocations-a-number", { options: { now: NOW, revocations: 1 } });
await offTick("options-revocations-an-object", { options: { now: NOW, revocations: { g: 1 } } });
await offTick("options-revocations-a-null", { options: { now: NOW, revocations: [null] } });
await offTick("options-revocation-without-suite", { options: { now: NOW, revocations: [await (async () => {
  const r: any = await revoke({}, 1); return signRaw(Object.fromEntries(Object.entries(r).filter(([k]) => k !== "signature" && k !== "suite")), 1); })()] } });
await offTick("options-revocation-unknown-member", { options: { now: NOW, revocations: [await revoke({ reason: "x" }, 1)] } });
await offTick("options-freshness-a-number", { options: { now: NOW, revocations: [], revocationFreshness: 5 } });

// Parts that are not JSON objects: the reference reads their members as
// undefined and answers; dgw refuses them as not the artifact's shape.
for (const [label, part] of [["receipt-a-number", 0], ["receipt-an-array", []], ["receipt-a-string", "s"]] as const)
  await judged(`off-shape-${label}`, "receipt", { receipt: part }, () => verifyReceiptVerdict(part as any), "not a JSON object");
{
  const base: any = cases.find((c: any) => c.kind === "delegation_token")?.input;
  for (const [label, part] of [["token", "s"], ["grant", []], ["options", 0]] as const) {
    const input: any = { ...base, [label]: part };
    await judged(`off-shape-${label}-not-an-object`, "delegation_token", input,
      () => verifyDelegationTokenVerdict(input.token, input.grant, input.options), "not a JSON object");
  }
}
// A "signature" under a small-order key (the identity point), which
// @noble/ed25519's default ZIP-215 rules accept for any message: the
// reference reads it `verified` and `sovereign`, though anyone can make
// it. dgw verifies strictly (decision 174) and reads it `invalid`.
{
  const key = "01" + "00".repeat(31);
  const sig = new Uint8Array(64); sig[0] = 1;
  const forged: any = { task_id: `t-${cases.length}`, motebit_id: await deriveSovereignMotebitId(key), device_id: "dev",
    submitted_at: NOW, completed_at: NOW + 5, status: "completed", result: "anything", tools_used: [],
    memories_formed: 0, prompt_hash: await sha("p"), result_hash: await sha("anything"), public_key: key,
    suite: "motebit-jcs-ed25519-b64-v1", signature: toBase64Url(sig) };
  await judged("off-receipt-small-order-key", "receipt", { receipt: forged }, () => verifyReceiptVerdict(forged));
  cases[cases.length - 1].dgw_diverges = "strict Ed25519: a small-order key's signature is invalid (decision 174)";
}
process.stdout.write(JSON.stringify(cases));
