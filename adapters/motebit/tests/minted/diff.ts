// Differential run (not vendored, not in CI): takes the vendored cases the
// reference answers, mutates 1-3 members of each of 600 (set to a value
// from a pool of awkward ones, or deleted; re-signed half the time), and
// prints each with the reference's verdict (or what it threw). Bundle as
// gen.ts; `node diff.mjs reference-verdicts.json SEED > /tmp/diff.json`,
// then `python3 compare.py /tmp/diff.json target/debug/dgw`.
import * as ed from "@noble/ed25519";
import { sha512 } from "@noble/hashes/sha2.js";
import { verifyReceiptVerdict, verifyDelegationTokenVerdict } from "./packages/crypto/src/index.ts";
import { canonicalJson, toBase64Url } from "./packages/crypto/src/signing.ts";
import { readFileSync } from "node:fs";
ed.hashes.sha512 = sha512;
const seed = (n: number) => new Uint8Array(32).fill(n);
let s = Number(process.argv[3] ?? 12345);
const rnd = (n: number) => { s = (s * 1103515245 + 12345) % 2147483648; return s % n; };
const pick = (a: any[]) => a[rnd(a.length)];
const base: any[] = JSON.parse(readFileSync(process.argv[2], "utf8")).filter((c: any) => !c.throws && !c.dgw_refuses);
const NOW = 1_750_000_000_000;
const pool = () => [null, 0, -0, 1, -1, 1.5, 1e21, 2 ** 53 + 2, "", " ", "0", " 12 ", "0x10", "1e3", "Infinity", "-Infinity", "abc", "*", " * ", "a, b", "a,*",
  [], [1], ["a", "b"], [[1, 2], null], {}, { a: 1 }, { length: 0 }, { length: 4 }, true, false, NOW, NOW + 1, String(NOW), "g-1", "motebit-jcs-ed25519-b64-v1",
  "ordering", "wall_clock", "delegate", "a", "a,b"];
const members: any = {
  receipt: ["task_id", "motebit_id", "public_key", "result", "result_hash", "suite", "signature", "status", "x"],
  token: ["delegator_id", "delegator_public_key", "delegate_id", "delegate_public_key", "scope", "grant_id", "issued_at", "expires_at", "not_before", "suite", "signature", "y"],
  grant: ["grant_id", "delegator_id", "delegator_public_key", "delegate_id", "delegate_public_key", "scope", "not_before", "expires_at", "max_token_ttl_ms", "suite", "signature", "z"],
  options: ["now", "temporalMode", "revocations", "revocationFreshness"],
};
const out: any[] = [];
for (let i = 0; i < 600; i++) {
  const c = JSON.parse(JSON.stringify(pick(base)));
  const parts = c.kind === "receipt" ? ["receipt"] : ["token", "grant", "options"];
  const nmut = 1 + rnd(3);
  for (let k = 0; k < nmut; k++) {
    const part = pick(parts);
    const obj = c.input[part];
    if (obj === null || typeof obj !== "object") continue;
    const m = pick(members[part]);
    const v = pick(pool());
    if (rnd(4) === 0) delete obj[m]; else obj[m] = v;
    // re-sign sometimes with the delegator's/receipt seed guess (1 or the embedded key's seed unknown): use seed 1..40 by matching key
    if (rnd(2) === 0 && part !== "options") {
      const { signature, ...body } = obj;
      for (let n = 1; n <= 40; n++) {
        const pk = Array.from(await ed.getPublicKeyAsync(seed(n))).map((b: number) => b.toString(16).padStart(2, "0")).join("");
        if (pk === (part === "receipt" ? obj.public_key : obj.delegator_public_key)) {
          obj.signature = toBase64Url(await ed.signAsync(new TextEncoder().encode(canonicalJson(body)), seed(n)));
          break;
        }
      }
    }
  }
  if (c.input.options && typeof c.input.options === "object" && c.input.options.now === undefined) c.input.options.now = NOW;
  try {
    const expected = c.kind === "receipt" ? await verifyReceiptVerdict(c.input.receipt)
      : await verifyDelegationTokenVerdict(c.input.token, c.input.grant, c.input.options);
    out.push({ name: `diff-${i}`, kind: c.kind, input: c.input, expected });
  } catch (e: any) {
    out.push({ name: `diff-${i}`, kind: c.kind, input: c.input, expected: null, throws: String(e?.message ?? e) });
  }
}
process.stdout.write(JSON.stringify(out));
