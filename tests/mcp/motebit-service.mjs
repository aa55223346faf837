// A Motebit service for tests, on the official MCP SDK (stdio): the
// synthetic tools the reference's service exposes, `motebit_identity` and
// `motebit_task`, the latter answering with a signed ExecutionReceipt as the
// reference formats it (the receipt's JSON, then an identity tag line).
// Receipts are signed from the texts (execution-ledger §11.2) with
// @noble/ed25519 and a JCS canonicalizer.
//   node motebit-service.mjs SEED [--forge] [--no-suite] [--id MOTEBIT_ID]
// SEED is one byte, repeated 32 times; --forge changes the result after
// signing; --no-suite removes `suite` after signing; --id claims that
// motebit_id instead of the sovereign one.
import { createHash } from 'node:crypto';
import * as ed from '@noble/ed25519';
import canonicalize from 'canonicalize';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { z } from 'zod';

const args = process.argv.slice(2);
const seed = new Uint8Array(32).fill(Number(args[0]));
const forge = args.includes('--forge');
const noSuite = args.includes('--no-suite');
const claimed = args.includes('--id') ? args[args.indexOf('--id') + 1] : null;
const sha256 = (data) => createHash('sha256').update(data).digest();
const publicKey = Buffer.from(await ed.getPublicKeyAsync(seed)).toString('hex');

// The sovereign id: SHA-256 of the key, first 16 bytes, as a UUID v8.
function sovereignId(keyHex) {
  const b = sha256(Buffer.from(keyHex, 'hex')).subarray(0, 16);
  b[6] = 0x80 | (b[6] & 0x0f);
  b[8] = 0x80 | (b[8] & 0x3f);
  const h = b.toString('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}
const motebitId = claimed ?? sovereignId(publicKey);
let tasks = 0;

const server = new McpServer({ name: 'motebit-service', version: '1.0.0' });
server.registerTool('motebit_identity', { description: "Return this motebit's identity information" }, async () => ({
  content: [{ type: 'text', text: JSON.stringify({ motebit_id: motebitId, public_key: publicKey }) }],
}));
server.registerTool(
  'motebit_task',
  { description: 'Submit an autonomous task — returns a signed ExecutionReceipt', inputSchema: { prompt: z.string() } },
  async ({ prompt }) => {
    tasks += 1;
    const now = Date.now();
    const result = `done: ${prompt}`;
    const receipt = {
      task_id: `task-${tasks}`, motebit_id: motebitId, device_id: 'device-1',
      submitted_at: now - 5, completed_at: now, status: 'completed', result,
      tools_used: ['web_search'], memories_formed: 0,
      prompt_hash: sha256(prompt).toString('hex'), result_hash: sha256(result).toString('hex'),
      public_key: publicKey, suite: 'motebit-jcs-ed25519-b64-v1',
    };
    const bytes = new TextEncoder().encode(canonicalize(receipt));
    receipt.signature = Buffer.from(await ed.signAsync(bytes, seed)).toString('base64url');
    if (forge) receipt.result = 'forged';
    if (noSuite) delete receipt.suite;
    const tag = `[motebit:${motebitId.slice(0, 8)} key:${publicKey.slice(0, 16)}]`;
    return { content: [{ type: 'text', text: `${JSON.stringify(receipt)}\n${tag}` }] };
  },
);
await server.connect(new StdioServerTransport());
