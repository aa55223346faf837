// A stdio MCP upstream wrapper for tests: runs `command args...` and
// appends every line it receives on stdin to LOG before passing it on, so a
// test can prove what reached the real server (and what never did).
//   node record.mjs LOG command args...
import { spawn } from "node:child_process";
import { appendFileSync } from "node:fs";
import { createInterface } from "node:readline";

const [log, command, ...args] = process.argv.slice(2);
const child = spawn(command, args, { stdio: ["pipe", "inherit", "inherit"] });
child.on("exit", (code) => process.exit(code ?? 1));
createInterface({ input: process.stdin }).on("line", (line) => {
  appendFileSync(log, line + "\n");
  child.stdin.write(line + "\n");
});
process.stdin.on("end", () => child.stdin.end());
