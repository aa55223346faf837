// Puts the caller's credential on every request: the MCP conformance suite
// has no option for a header, and every request to dgw must carry a DCT.
// Forwards each request to 127.0.0.1:<target> as it came (method, path,
// headers, body) plus `Authorization: <value>`, and streams the answer back
// as it arrives (SSE included). The proxy stands in for dgw's address: a
// Host or Origin naming the proxy names dgw instead; any other (a DNS
// rebinding attempt) goes on as it came.
//
// Usage: node header-proxy.mjs TARGET_PORT AUTHORIZATION_VALUE
//        (prints `listening <port>`)

import http from 'node:http';

const [target, authorization] = process.argv.slice(2);

let own = null;

/** `value` with the proxy's own `host:port` replaced by dgw's. */
function retarget(value) {
  if (typeof value !== 'string') return value;
  for (const name of ['127.0.0.1', 'localhost']) {
    const mine = `${name}:${own}`;
    if (value === mine) return `${name}:${target}`;
    if (value === `http://${mine}`) return `http://${name}:${target}`;
  }
  return value;
}

const server = http.createServer((req, res) => {
  const headers = { ...req.headers, authorization };
  headers.host = retarget(headers.host);
  if (headers.origin !== undefined) headers.origin = retarget(headers.origin);
  const upstream = http.request(
    { host: '127.0.0.1', port: Number(target), method: req.method, path: req.url, headers },
    (answer) => {
      res.writeHead(answer.statusCode, answer.headers);
      answer.pipe(res);
    },
  );
  upstream.on('error', () => {
    if (!res.headersSent) res.writeHead(502);
    res.end();
  });
  // The caller going away ends the forwarded request too (cancellation).
  res.on('close', () => upstream.destroy());
  req.pipe(upstream);
});

server.listen(0, '127.0.0.1', () => {
  own = server.address().port;
  console.log(`listening ${own}`);
});
