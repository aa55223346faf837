// The upstream the MCP conformance suite's server scenarios call
// (tests/mcp_conformance.rs): the tools, resources, prompts and completion
// each scenario's description asks for, served with the official
// TypeScript SDK v2 (@modelcontextprotocol/server) for both eras:
// 2026-07-28 (stateless, per-request `_meta`) and the session revisions
// (2025-06-18, 2025-11-25: initialize, Mcp-Session-Id, server-to-client
// requests on the POST's stream). One factory defines the surface once.
//
// Usage: node conformance-upstream.mjs [--modern-only]   (prints `listening <port>`)
//   --modern-only: 2026-07-28 only, as the SDK's strict modern handler
//   serves it (`legacy: 'reject'`: `initialize` is refused with the
//   versions it speaks), for dgw's detection of what an upstream speaks.
// Outside MCP, for tests of `subscriptions/listen`: `POST /touch?uri=U&n=N`
// publishes N `notifications/resources/updated` for U (padded with
// `&pad=BYTES`; and, with `&lists=1`, N of each list_changed) to the open
// listen streams.

import http from 'node:http';
import { randomUUID, createHmac, timingSafeEqual } from 'node:crypto';
import {
  McpServer,
  ResourceTemplate,
  ProtocolError,
  WebStandardStreamableHTTPServerTransport,
  fromJsonSchema,
  createMcpHandler,
  isLegacyRequest,
  completable,
} from '@modelcontextprotocol/server';
import { z } from 'zod';

// A 1x1 red PNG and a 44-byte silent WAV header: the smallest valid payloads.
const PNG =
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==';
const WAV = Buffer.from(
  'RIFF$\u0000\u0000\u0000WAVEfmt \u0010\u0000\u0000\u0000\u0001\u0000\u0001\u0000D\u00ac\u0000\u0000\u0088X\u0001\u0000\u0002\u0000\u0010\u0000data\u0000\u0000\u0000\u0000',
  'latin1',
).toString('base64');

// requestState is sealed with an HMAC so a tampered one is refused.
const SECRET = randomUUID();
function seal(payload) {
  const data = JSON.stringify(payload);
  const mac = createHmac('sha256', SECRET).update(data).digest('base64url');
  return Buffer.from(JSON.stringify({ data, mac })).toString('base64url');
}
function unseal(state) {
  try {
    const { data, mac } = JSON.parse(Buffer.from(String(state), 'base64url').toString());
    const want = createHmac('sha256', SECRET).update(data).digest('base64url');
    const a = Buffer.from(String(mac));
    const b = Buffer.from(want);
    if (a.length !== b.length || !timingSafeEqual(a, b)) return null;
    return JSON.parse(data);
  } catch {
    return null;
  }
}

const text = (t) => ({ content: [{ type: 'text', text: t }] });
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const elicitName = (message) => ({
  method: 'elicitation/create',
  params: {
    message,
    requestedSchema: { type: 'object', properties: { name: { type: 'string' } }, required: ['name'] },
  },
});
const needInput = (inputRequests, requestState) => ({
  resultType: 'input_required',
  inputRequests,
  ...(requestState === undefined ? {} : { requestState }),
});
/** The bare response the client gave for `key`, if it is an object. */
function answer(ctx, key) {
  const v = ctx.mcpReq.inputResponses?.[key];
  return v && typeof v === 'object' && !Array.isArray(v) ? v : undefined;
}
function badState() {
  return new ProtocolError(-32602, 'requestState failed its integrity check');
}
/** The capabilities a 2026-07-28 request declared (undefined on a session). */
const declared = (ctx) => ctx.mcpReq.envelope?.['io.modelcontextprotocol/clientCapabilities'];

// SEP-1613/SEP-2106: a tool whose input schema uses JSON Schema 2020-12.
const SCHEMA_2020_12 = {
  $schema: 'https://json-schema.org/draft/2020-12/schema',
  type: 'object',
  $defs: {
    address: { $anchor: 'addressDef', type: 'object', properties: { street: { type: 'string' }, city: { type: 'string' } } },
  },
  properties: {
    name: { type: 'string' },
    address: { $ref: '#/$defs/address' },
    contactMethod: { type: 'string', enum: ['phone', 'email'] },
    phone: { type: 'string' },
    email: { type: 'string' },
  },
  allOf: [{ anyOf: [{ required: ['phone'] }, { required: ['email'] }] }],
  if: { properties: { contactMethod: { const: 'phone' } }, required: ['contactMethod'] },
  then: { required: ['phone'] },
  else: { required: ['email'] },
  additionalProperties: false,
};

function surface() {
  const server = new McpServer(
    { name: 'dgw-conformance-upstream', version: '1.0.0' },
    {
      capabilities: {
        tools: { listChanged: true },
        resources: { subscribe: true, listChanged: true },
        prompts: { listChanged: true },
        logging: {},
        completions: {},
      },
      // A sealed requestState is checked before any handler runs; the
      // handler reads the payload it sealed.
      requestState: {
        verify: (state) => {
          const payload = unseal(state);
          if (!payload) throw new Error('requestState failed its integrity check');
          return payload;
        },
      },
      cacheHints: {
        'tools/list': { ttlMs: 60000, cacheScope: 'private' },
        'prompts/list': { ttlMs: 60000, cacheScope: 'private' },
        'resources/list': { ttlMs: 60000, cacheScope: 'private' },
        'resources/templates/list': { ttlMs: 60000, cacheScope: 'private' },
        'resources/read': { ttlMs: 60000, cacheScope: 'private' },
        'server/discover': { ttlMs: 60000, cacheScope: 'private' },
      },
    },
  );

  server.registerTool('test_simple_text', { description: 'A simple text answer' }, async () =>
    text('This is a simple text response for testing.'),
  );
  server.registerTool('test_image_content', { description: 'An image answer' }, async () => ({
    content: [{ type: 'image', data: PNG, mimeType: 'image/png' }],
  }));
  server.registerTool('test_audio_content', { description: 'An audio answer' }, async () => ({
    content: [{ type: 'audio', data: WAV, mimeType: 'audio/wav' }],
  }));
  server.registerTool('test_embedded_resource', { description: 'An embedded resource' }, async () => ({
    content: [
      {
        type: 'resource',
        resource: { uri: 'test://embedded-resource', mimeType: 'text/plain', text: 'This is an embedded resource content.' },
      },
    ],
  }));
  server.registerTool('test_multiple_content_types', { description: 'Text, image and resource' }, async () => ({
    content: [
      { type: 'text', text: 'Multiple content types test:' },
      { type: 'image', data: PNG, mimeType: 'image/png' },
      {
        type: 'resource',
        resource: {
          uri: 'test://mixed-content-resource',
          mimeType: 'application/json',
          text: JSON.stringify({ test: 'data', value: 123 }),
        },
      },
    ],
  }));
  const logThree = async (ctx) => {
    for (const [i, m] of ['Tool execution started', 'Tool processing data', 'Tool execution completed'].entries()) {
      if (i > 0) await sleep(50);
      await ctx.mcpReq.log('info', m, 'conformance-upstream');
    }
  };
  server.registerTool('test_tool_with_logging', { description: 'Logs three messages', inputSchema: {} }, async (_a, ctx) => {
    await logThree(ctx);
    return text('Tool with logging executed successfully');
  });
  server.registerTool('test_logging_tool', { description: 'Logs three messages', inputSchema: {} }, async (_a, ctx) => {
    await logThree(ctx);
    return text('Logging tool executed successfully');
  });
  server.registerTool('test_tool_with_progress', { description: 'Reports progress', inputSchema: {} }, async (_a, ctx) => {
    const token = ctx.mcpReq._meta?.progressToken;
    for (const p of [0, 50, 100]) {
      if (p > 0) await sleep(50);
      if (token !== undefined) {
        await ctx.mcpReq.notify({
          method: 'notifications/progress',
          params: { progressToken: token, progress: p, total: 100, message: `Completed step ${p} of 100` },
        });
      }
    }
    return text(String(token ?? 'no progress token'));
  });
  server.registerTool('test_error_handling', { description: 'Always fails' }, async () => {
    throw new Error('This tool intentionally returns an error for testing');
  });
  server.registerTool(
    'test_sampling',
    { description: 'Asks the client for a completion', inputSchema: { prompt: z.string() } },
    async ({ prompt }, ctx) => {
      const got = answer(ctx, 'sample');
      if (!got) {
        return needInput({
          sample: {
            method: 'sampling/createMessage',
            params: { messages: [{ role: 'user', content: { type: 'text', text: prompt } }], maxTokens: 100 },
          },
        });
      }
      return text(`LLM response: ${got.content?.text ?? 'No response'}`);
    },
  );
  server.registerTool(
    'test_elicitation',
    { description: 'Asks the user', inputSchema: { message: z.string() } },
    async ({ message }, ctx) => {
      const got = answer(ctx, 'ask');
      if (!got) {
        return needInput({
          ask: {
            method: 'elicitation/create',
            params: {
              message,
              requestedSchema: {
                type: 'object',
                properties: {
                  username: { type: 'string', description: "User's response" },
                  email: { type: 'string', description: "User's email address" },
                },
                required: ['username', 'email'],
              },
            },
          },
        });
      }
      return text(`User response: action=${got.action}, content=${JSON.stringify(got.content ?? {})}`);
    },
  );
  const elicitTool = (name, requestedSchema) =>
    server.registerTool(name, { description: 'Elicitation schema test', inputSchema: {} }, async (_a, ctx) => {
      const got = answer(ctx, 'form');
      if (!got) {
        return needInput({ form: { method: 'elicitation/create', params: { message: 'Please review', requestedSchema } } });
      }
      return text(`Elicitation completed: action=${got.action}, content=${JSON.stringify(got.content ?? {})}`);
    });
  elicitTool('test_elicitation_sep1034_defaults', {
    type: 'object',
    properties: {
      name: { type: 'string', default: 'John Doe' },
      age: { type: 'integer', default: 30 },
      score: { type: 'number', default: 95.5 },
      status: { type: 'string', enum: ['active', 'inactive', 'pending'], default: 'active' },
      verified: { type: 'boolean', default: true },
    },
  });
  elicitTool('test_elicitation_sep1330_enums', {
    type: 'object',
    properties: {
      untitledSingle: { type: 'string', enum: ['option1', 'option2', 'option3'] },
      titledSingle: {
        type: 'string',
        oneOf: [
          { const: 'value1', title: 'First Option' },
          { const: 'value2', title: 'Second Option' },
          { const: 'value3', title: 'Third Option' },
        ],
      },
      legacyEnum: { type: 'string', enum: ['opt1', 'opt2', 'opt3'], enumNames: ['Option One', 'Option Two', 'Option Three'] },
      untitledMulti: { type: 'array', items: { type: 'string', enum: ['option1', 'option2', 'option3'] } },
      titledMulti: {
        type: 'array',
        items: {
          anyOf: [
            { const: 'value1', title: 'First Choice' },
            { const: 'value2', title: 'Second Choice' },
            { const: 'value3', title: 'Third Choice' },
          ],
        },
      },
    },
  });

  // Multi round-trip requests (2026-07-28; the SDK fulfils them itself
  // with real server-to-client requests on the session revisions).
  server.registerTool('test_input_required_result_elicitation', { description: 'MRTR elicitation', inputSchema: {} }, async (_a, ctx) => {
    const got = answer(ctx, 'user_name');
    if (!got || typeof got.content?.name !== 'string') return needInput({ user_name: elicitName('What is your name?') });
    return text(`Hello, ${got.content.name}!`);
  });
  server.registerTool('test_input_required_result_sampling', { description: 'MRTR sampling', inputSchema: {} }, async (_a, ctx) => {
    const got = answer(ctx, 'capital_question');
    if (!got) {
      return needInput({
        capital_question: {
          method: 'sampling/createMessage',
          params: { messages: [{ role: 'user', content: { type: 'text', text: 'What is the capital of France?' } }], maxTokens: 100 },
        },
      });
    }
    return text(`The model said: ${got.content?.text ?? ''}`);
  });
  server.registerTool('test_input_required_result_list_roots', { description: 'MRTR roots', inputSchema: {} }, async (_a, ctx) => {
    const got = answer(ctx, 'client_roots');
    if (!got || !Array.isArray(got.roots)) return needInput({ client_roots: { method: 'roots/list', params: {} } });
    return text(`Roots: ${got.roots.map((r) => r.uri).join(', ')}`);
  });
  server.registerTool('test_input_required_result_request_state', { description: 'MRTR with state', inputSchema: {} }, async (_a, ctx) => {
    const state = ctx.mcpReq.requestState();
    const got = answer(ctx, 'confirm');
    if (state === undefined || !got) {
      return needInput(
        {
          confirm: {
            method: 'elicitation/create',
            params: {
              message: 'Please confirm',
              requestedSchema: { type: 'object', properties: { ok: { type: 'boolean' } }, required: ['ok'] },
            },
          },
        },
        seal({ tool: 'request_state' }),
      );
    }
    if (state.tool !== 'request_state') throw badState();
    return text('state-ok: confirmed');
  });
  server.registerTool('test_input_required_result_multiple_inputs', { description: 'MRTR three inputs', inputSchema: {} }, async (_a, ctx) => {
    const state = ctx.mcpReq.requestState();
    const keys = ['user_name', 'greeting', 'client_roots'];
    if (state === undefined || !keys.every((k) => answer(ctx, k))) {
      return needInput(
        {
          user_name: elicitName('What is your name?'),
          greeting: {
            method: 'sampling/createMessage',
            params: { messages: [{ role: 'user', content: { type: 'text', text: 'Generate a greeting' } }], maxTokens: 50 },
          },
          client_roots: { method: 'roots/list', params: {} },
        },
        seal({ tool: 'multiple' }),
      );
    }
    if (state.tool !== 'multiple') throw badState();
    return text('All inputs received');
  });
  server.registerTool('test_input_required_result_multi_round', { description: 'MRTR in two rounds', inputSchema: {} }, async (_a, ctx) => {
    const round = ctx.mcpReq.requestState();
    if (!round || (round.step === 1 && !answer(ctx, 'step1'))) {
      return needInput({ step1: elicitName('Step 1: What is your name?') }, seal({ step: 1 }));
    }
    if (round.step === 1 || !answer(ctx, 'step2')) {
      const name = round.name ?? answer(ctx, 'step1')?.content?.name ?? '';
      return needInput(
        {
          step2: {
            method: 'elicitation/create',
            params: {
              message: 'Step 2: What is your favorite color?',
              requestedSchema: { type: 'object', properties: { color: { type: 'string' } }, required: ['color'] },
            },
          },
        },
        seal({ step: 2, name }),
      );
    }
    return text(`Done: ${round.name} likes ${answer(ctx, 'step2').content?.color}`);
  });
  server.registerTool('test_input_required_result_tampered_state', { description: 'MRTR with sealed state', inputSchema: {} }, async (_a, ctx) => {
    const state = ctx.mcpReq.requestState();
    if (state === undefined) return needInput({ confirm: elicitName('Who are you?') }, seal({ tool: 'tampered' }));
    if (state.tool !== 'tampered') throw badState();
    return text('state verified');
  });
  server.registerTool('test_input_required_result_capabilities', { description: 'MRTR by capability', inputSchema: {} }, async (_a, ctx) => {
    const caps = declared(ctx) ?? { elicitation: {}, sampling: {} };
    const wanted = {};
    if (caps.elicitation && !answer(ctx, 'user_name')) wanted.user_name = elicitName('What is your name?');
    if (caps.sampling && !answer(ctx, 'greeting')) {
      wanted.greeting = {
        method: 'sampling/createMessage',
        params: { messages: [{ role: 'user', content: { type: 'text', text: 'Generate a greeting' } }], maxTokens: 50 },
      };
    }
    if (Object.keys(wanted).length > 0) return needInput(wanted);
    return text('Asked only for what the client can give');
  });
  // 2026-07-28 diagnostics (server-stateless): a tool that needs a client
  // capability the request must declare, and one that elicits on its stream.
  server.registerTool('test_missing_capability', { description: 'Needs sampling', inputSchema: {} }, async (_a, ctx) => {
    // The SDK refuses an input request the client cannot fulfil (-32021).
    const got = answer(ctx, 'sample');
    if (!got) {
      return needInput({
        sample: {
          method: 'sampling/createMessage',
          params: { messages: [{ role: 'user', content: { type: 'text', text: 'Say yes' } }], maxTokens: 10 },
        },
      });
    }
    return text(`sampled: ${got.content?.text ?? ''}`);
  });
  server.registerTool('test_streaming_elicitation', { description: 'Elicits after a progress note', inputSchema: {} }, async (_a, ctx) => {
    const got = answer(ctx, 'confirm');
    if (!got) {
      await ctx.mcpReq.log('info', 'about to ask', 'conformance-upstream');
      return needInput({ confirm: elicitName('Please confirm your name') });
    }
    return text(`confirmed ${got.content?.name}`);
  });
  server.registerTool(
    'json_schema_2020_12_tool',
    { description: 'A JSON Schema 2020-12 input schema', inputSchema: fromJsonSchema(SCHEMA_2020_12) },
    async (args) => text(JSON.stringify(args)),
  );
  // SEP-2243: a parameter mirrored into an `Mcp-Param-Region` header.
  server.registerTool(
    'test_header_param',
    {
      description: 'Mirrors its region into a header',
      inputSchema: fromJsonSchema({
        type: 'object',
        properties: { region: { type: 'string', 'x-mcp-header': 'Region' }, query: { type: 'string' } },
        required: ['region'],
      }),
    },
    async ({ region }) => text(`region ${region}`),
  );
  server.registerPrompt('test_input_required_result_prompt', { description: 'MRTR prompt' }, async (ctx) => {
    const got = answer(ctx, 'user_context');
    if (!got) {
      return needInput({
        user_context: {
          method: 'elicitation/create',
          params: {
            message: 'What context should the prompt use?',
            requestedSchema: { type: 'object', properties: { context: { type: 'string' } }, required: ['context'] },
          },
        },
      });
    }
    return { messages: [{ role: 'user', content: { type: 'text', text: `Context: ${got.content?.context}` } }] };
  });

  // Resources.
  server.registerResource(
    'static-text',
    'test://static-text',
    { description: 'A static text resource', mimeType: 'text/plain' },
    async () => ({
      contents: [{ uri: 'test://static-text', mimeType: 'text/plain', text: 'This is the content of the static text resource.' }],
    }),
  );
  server.registerResource(
    'static-binary',
    'test://static-binary',
    { description: 'A static binary resource', mimeType: 'image/png' },
    async () => ({ contents: [{ uri: 'test://static-binary', mimeType: 'image/png', blob: PNG }] }),
  );
  server.registerResource(
    'watched-resource',
    'test://watched-resource',
    { description: 'A resource to subscribe to', mimeType: 'text/plain' },
    async () => ({ contents: [{ uri: 'test://watched-resource', mimeType: 'text/plain', text: 'Watched resource content' }] }),
  );
  server.registerResource(
    'template',
    new ResourceTemplate('test://template/{id}/data', { list: undefined }),
    { description: 'A resource template', mimeType: 'application/json' },
    async (uri, { id }) => ({
      contents: [
        {
          uri: uri.toString(),
          mimeType: 'application/json',
          text: JSON.stringify({ id, templateTest: true, data: `Data for ID: ${id}` }),
        },
      ],
    }),
  );

  // Session revisions: subscriptions are accepted and remembered.
  const subscribed = new Set();
  server.server.setRequestHandler('resources/subscribe', async (req) => {
    subscribed.add(req.params.uri);
    return {};
  });
  server.server.setRequestHandler('resources/unsubscribe', async (req) => {
    subscribed.delete(req.params.uri);
    return {};
  });

  // Prompts.
  server.registerPrompt('test_simple_prompt', { description: 'A simple prompt' }, async () => ({
    messages: [{ role: 'user', content: { type: 'text', text: 'This is a simple prompt for testing.' } }],
  }));
  server.registerPrompt(
    'test_prompt_with_arguments',
    {
      description: 'A prompt with arguments',
      argsSchema: {
        arg1: completable(z.string().describe('First test argument'), (v) =>
          ['paris', 'park', 'party'].filter((c) => c.startsWith(v ?? '')),
        ),
        arg2: z.string().describe('Second test argument'),
      },
    },
    async ({ arg1, arg2 }) => ({
      messages: [{ role: 'user', content: { type: 'text', text: `Prompt with arguments: arg1='${arg1}', arg2='${arg2}'` } }],
    }),
  );
  server.registerPrompt(
    'test_prompt_with_embedded_resource',
    { description: 'A prompt embedding a resource', argsSchema: { resourceUri: z.string() } },
    async ({ resourceUri }) => ({
      messages: [
        {
          role: 'user',
          content: { type: 'resource', resource: { uri: resourceUri, mimeType: 'text/plain', text: 'Embedded resource content for testing.' } },
        },
        { role: 'user', content: { type: 'text', text: 'Please process the embedded resource above.' } },
      ],
    }),
  );
  server.registerPrompt('test_prompt_with_image', { description: 'A prompt with an image' }, async () => ({
    messages: [
      { role: 'user', content: { type: 'image', data: PNG, mimeType: 'image/png' } },
      { role: 'user', content: { type: 'text', text: 'Please analyze the image above.' } },
    ],
  }));
  return server;
}

// 2026-07-28: a fresh instance per request. Session revisions: one
// instance per session, kept until DELETE.
const MODERN_ONLY = process.argv.includes('--modern-only');
const modern = createMcpHandler(surface, { legacy: 'reject' });
const sessions = new Map();

async function legacy(request) {
  const id = request.headers.get('mcp-session-id');
  if (id) {
    const t = sessions.get(id);
    if (!t) {
      return Response.json({ jsonrpc: '2.0', id: null, error: { code: -32001, message: 'Session not found' } }, { status: 404 });
    }
    return t.handleRequest(request);
  }
  const transport = new WebStandardStreamableHTTPServerTransport({
    sessionIdGenerator: () => randomUUID(),
    onsessioninitialized: (sid) => sessions.set(sid, transport),
    onsessionclosed: (sid) => sessions.delete(sid),
  });
  await surface().connect(transport);
  return transport.handleRequest(request);
}

const ALLOWED_HOSTS = new Set(['127.0.0.1', 'localhost']);

const server = http.createServer(async (req, res) => {
  try {
    // DNS rebinding: only loopback Host and Origin names.
    const host = (req.headers.host ?? '').replace(/:\d+$/, '');
    const origin = req.headers.origin;
    let originHost = null;
    try {
      originHost = origin ? new URL(origin).hostname : null;
    } catch {
      originHost = '?';
    }
    if (!ALLOWED_HOSTS.has(host) || (origin && !ALLOWED_HOSTS.has(originHost))) {
      res.writeHead(403, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ jsonrpc: '2.0', id: null, error: { code: -32000, message: 'Forbidden host or origin' } }));
      return;
    }
    const chunks = [];
    for await (const c of req) chunks.push(c);
    const body = chunks.length ? Buffer.concat(chunks) : undefined;
    const abort = new AbortController();
    res.on('close', () => abort.abort());
    const request = new Request(`http://${req.headers.host}${req.url}`, {
      method: req.method,
      headers: Object.entries(req.headers).flatMap(([k, v]) => (Array.isArray(v) ? v.map((x) => [k, x]) : [[k, v]])),
      body: req.method === 'GET' || req.method === 'HEAD' ? undefined : body,
      signal: abort.signal,
    });
        if (req.url.startsWith('/touch?')) {
      const q = new URL(req.url, 'http://x').searchParams;
      const pad = q.get('pad') ? { pad: 'x'.repeat(Number(q.get('pad'))) } : undefined;
      for (let i = 0; i < Number(q.get('n') ?? 1); i++) {
        modern.bus.publish({ kind: 'resource_updated', uri: q.get('uri'), params: pad });
        if (q.get('lists')) {
          modern.notify.toolsChanged();
          modern.notify.resourcesChanged();
        }
      }
      res.writeHead(204);
      res.end();
      return;
    }
    const toLegacy = !MODERN_ONLY && (await isLegacyRequest(request));
    const response = toLegacy ? await legacy(request) : await modern.fetch(request);
    res.writeHead(response.status, Object.fromEntries(response.headers));
    if (response.body) {
      for await (const chunk of response.body) res.write(chunk);
    }
    res.end();
  } catch (e) {
    if (!res.headersSent) res.writeHead(500);
    res.end();
    console.error('upstream error:', e);
  }
});

server.listen(0, '127.0.0.1', () => console.log(`listening ${server.address().port}`));
