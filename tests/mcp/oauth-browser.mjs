// The user's browser in OAuth tests, driven over plain HTTP: follows
// redirects from URL, keeping cookies per host as a browser would (path
// and expiry aside: every cookie of a host goes back to it), until a
// Location starts with STOP (the redirect URI, or dgw's callback when a
// test tampers with it), and prints one JSON object:
// {"stopped": LOCATION, "cookies": {host: "a=1; b=2"}} or, when a page
// answers instead, {"status": N, "body": TEXT, "cookies": …}.
//   node oauth-browser.mjs URL STOP ['{"host": "a=1"}']
// Also a module: `browse(url, stop, jar)` for the MCP host script.

export async function browse(start, stop, jar = {}) {
  let url = new URL(start);
  for (let hop = 0; hop < 20; hop++) {
    const headers = jar[url.host] ? { cookie: jar[url.host] } : {};
    const res = await fetch(url, { redirect: "manual", headers });
    for (const c of res.headers.getSetCookie()) {
      const [pair] = c.split(";");
      const name = pair.split("=")[0];
      const kept = (jar[url.host] ?? "").split("; ").filter((p) => p && p.split("=")[0] !== name);
      jar[url.host] = [...kept, pair].join("; ");
    }
    const location = res.headers.get("location");
    if (res.status >= 300 && res.status < 400 && location) {
      const next = new URL(location, url);
      if (next.href.startsWith(stop)) return { stopped: next.href, cookies: jar };
      url = next;
      continue;
    }
    return { status: res.status, body: (await res.text()).slice(0, 2000), cookies: jar };
  }
  throw new Error(`more than 20 redirects from ${start}`);
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const [start, stop, jar] = process.argv.slice(2);
  console.log(JSON.stringify(await browse(start, stop, jar ? JSON.parse(jar) : {})));
}
