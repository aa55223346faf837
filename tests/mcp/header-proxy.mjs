// Puts the caller's credential on every request: the MCP conformance suite
// has no option for a header, and every request to dgw must carry a DCT.
// Forwards each request to 127.0.0.1:<target> as it came (method, path,
// headers, Host included, body) plus `Authorization: <value>`, and streams
// the answer back as it arrives (SSE included).
//
// Usage: node header-proxy.mjs TARGET_PORT AUTHORIZATION_VALUE
//        (prints `listening <port>`)

import http from 'node:http';

const [target, authorization] = process.argv.slice(2);

const server = http.createServer((req, res) => {
  const headers = { ...req.headers, authorization };
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

server.listen(0, '127.0.0.1', () => console.log(`listening ${server.address().port}`));
