"""Turns benches/compare/run.sh's rows into one Markdown table.

Each row on stdin: TARGET|POINT|SERVER_TICKS|UPSTREAM_TICKS|dgw-load output
and /usr/bin/time's `client_cpu USER SYS`. CPU is counted over the whole
run, warm-up included, so it is divided by the calls answered scaled to
the warm-up too: answers * (warm-up + duration) / duration.
"""

import re
import sys

WARMUP_S = 1.0


def seconds(text):
    m = re.fullmatch(r"(\d+(?:\.\d+)?)(ms|s)", text)
    if not m:
        sys.exit(f"table.py: cannot read the duration {text!r}")
    return float(m.group(1)) / (1000 if m.group(2) == "ms" else 1)


def main():
    duration, ticks_per_s = seconds(sys.argv[1]), float(sys.argv[2])
    rows = []
    for line in sys.stdin:
        target, point, server, upstream, out = line.rstrip("\n").split("|", 4)
        m = re.search(r": (\d+) answers \((\d+)/s\), (\d+) of them.*?p50 (\d+) µs, p99 (\d+) µs", out)
        c = re.search(r"client_cpu ([\d.]+) ([\d.]+)", out)
        if not m or not c:
            sys.exit(f"table.py: no figures in {out!r}")
        answers, rate, errors, p50, p99 = map(int, m.groups())
        sent = max(answers * (duration + WARMUP_S) / duration, 1)
        per_call = lambda s: s / sent * 1e6
        rows.append({
            "target": target, "point": point, "rate": rate, "errors": errors,
            "p50": p50, "p99": p99,
            "server": per_call(int(server) / ticks_per_s) if target != "direct" else None,
            "upstream": per_call(int(upstream) / ticks_per_s),
            "client": per_call(float(c.group(1)) + float(c.group(2))),
        })
    direct = {}
    for r in rows:
        if r["target"] == "direct":
            direct.setdefault(r["point"], []).append(r)
    print("| load | target | calls/s | × direct | p50 µs | p99 µs | failed | gateway CPU µs/call | upstream CPU µs/call | client CPU µs/call |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        kind, n = r["point"].split(":")
        load = f"closed, {n} conn." if kind == "closed" else f"open, {n}/s"
        base = direct.get(r["point"])
        if r["target"] == "direct" or not base:
            ratio = "1" if r["target"] == "direct" else "–"
        else:
            mean = sum(b["rate"] for b in base) / len(base)
            ratio = f"{r['rate'] / mean:.2f}"
        server = "–" if r["server"] is None else f"{r['server']:.1f}"
        print(f"| {load} | {r['target']} | {r['rate']:,} | {ratio} | {r['p50']:,} | {r['p99']:,} | "
              f"{r['errors']} | {server} | {r['upstream']:.1f} | {r['client']:.1f} |")


if __name__ == "__main__":
    main()
