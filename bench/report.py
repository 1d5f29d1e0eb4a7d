#!/usr/bin/env python3
"""Draws the benchmark table of bench/run.sh from its raw files (never from live state).

Usage: report.py DIR, where DIR holds runs.tsv, machine.txt and one .time/.out/.json per
run. Prints Markdown: machine, versions, the table of medians with ratios
ingressbench/peer and goals (MISSED when missed, n/a when a tool gave no result), then
notes on runs that are not valid as measurements, then every run's figures.
"""

import json
import os
import re
import statistics
import sys

DIR = sys.argv[1]


def machine():
    m = {}
    with open(os.path.join(DIR, "machine.txt")) as f:
        for line in f:
            k, _, v = line.rstrip("\n").partition("=")
            m[k] = v
    return m


M = machine()
CLK = float(M.get("clk_tck", "100"))
NOTES = []


def read(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


def cpu_time(base):
    """(user+sys CPU seconds, peak RSS in KB) from /usr/bin/time's "CPU %U %S %M %e"."""
    text = read(base + ".time") or ""
    for line in text.splitlines():
        if line.startswith("CPU "):
            u, s, rss, _ = line.split()[1:5]
            return float(u) + float(s), int(rss)
    return None, None


def dig(d, *keys):
    for k in keys:
        if not isinstance(d, dict) or k not in d:
            return None
        d = d[k]
    return d


def ib_result(base):
    try:
        with open(base + ".json") as f:
            j = json.load(f)
    except (OSError, ValueError):
        return None
    lag = dig(j, "latency_ms", "generator_lag", "p99")
    return {
        "completed": dig(j, "requests", "completed"),
        "failed": dig(j, "requests", "failed"),
        "rate": dig(j, "rate", "achieved"),
        "p50": dig(j, "latency_ms", "corrected", "p50"),
        "p90": dig(j, "latency_ms", "corrected", "p90"),
        "p99": dig(j, "latency_ms", "corrected", "p99"),
        "lag_p99_us": None if lag is None else lag * 1000.0,
        "overloaded": dig(j, "generator", "overloaded"),
        "partial": j.get("partial"),
        "sleeps": dig(j, "generator", "sleeps"),
        "sent": dig(j, "requests", "sent"),
    }


def wrk_result(base):
    text = read(base + ".out") or ""
    m = re.search(r"(\d+) requests in ([\d.]+)(us|ms|s|m)\b", text)
    if not m:
        return None
    scale = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0}[m.group(3)]
    completed = int(m.group(1))
    secs = float(m.group(2)) * scale
    failed = 0
    e = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", text)
    if e:
        failed += sum(int(x) for x in e.groups())
    n = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
    if n:
        failed += int(n.group(1))
    return {"completed": completed, "failed": failed, "rate": completed / secs if secs else None}


def oha_result(base):
    j = None
    for ext in (".json", ".out"):
        try:
            with open(base + ext) as f:
                j = json.load(f)
            break
        except (OSError, ValueError):
            pass
    if j is None:
        return None
    codes = j.get("statusCodeDistribution") or {}
    ok = sum(v for k, v in codes.items() if str(k).startswith("2"))
    bad = sum(v for k, v in codes.items() if not str(k).startswith("2"))
    errs = j.get("errorDistribution") or {}
    # Requests cut by the deadline (-z) are not failures of the target.
    failed = bad + sum(v for k, v in errs.items() if "deadline" not in k)
    total = dig(j, "summary", "total")
    p50 = dig(j, "latencyPercentiles", "p50")
    p90 = dig(j, "latencyPercentiles", "p90")
    p99 = dig(j, "latencyPercentiles", "p99")
    return {
        "completed": ok,
        "failed": failed,
        "rate": ok / total if total else None,
        "p50": None if p50 is None else p50 * 1000.0,
        "p90": None if p90 is None else p90 * 1000.0,
        "p99": None if p99 is None else p99 * 1000.0,
        # Requests the deadline cut, in flight or still queued: left out of oha's
        # percentiles.
        "cut": sum(v for k, v in errs.items() if "deadline" in k),
    }


def vegeta_result(base):
    """`vegeta report -type=json` of the run's results (latencies in ns)."""
    try:
        with open(base + ".json") as f:
            j = json.load(f)
    except (OSError, ValueError):
        return None
    codes = j.get("status_codes") or {}
    ok = sum(v for k, v in codes.items() if str(k).startswith("2"))
    lat = j.get("latencies") or {}
    ms = lambda k: None if lat.get(k) is None else lat[k] / 1e6
    return {
        "completed": ok,
        "failed": (j.get("requests") or 0) - ok,
        "rate": j.get("rate"),
        "p50": ms("50th"),
        "p90": ms("90th"),
        "p99": ms("99th"),
    }


PARSERS = {"ingressbench": ib_result, "wrk": wrk_result, "oha": oha_result, "vegeta": vegeta_result}

# (scenario, tool) -> list of per-rep dicts
RUNS = {}
with open(os.path.join(DIR, "runs.tsv")) as f:
    for line in f:
        scen, tool, rep, rc, dur, srv_ticks, extra = line.rstrip("\n").split("\t")
        base = os.path.join(DIR, f"{scen}.{tool}.{rep}")
        r = PARSERS[tool](base) if rc != "127" else None
        cpu, rss = cpu_time(base)
        rec = {"rep": int(rep), "rc": int(rc), "dur": float(dur)}
        if r is None or not r.get("completed"):
            why = "not available" if rc == "127" else f"no result (exit {rc})"
            if tool == "ingressbench" and rc != "127":
                first = (read(base + ".out") or "").strip().splitlines()[:1]
                if first:
                    why += f": {first[0][:120]}"
            NOTES.append(f"{scen} {tool} rep {rep}: {why}")
            RUNS.setdefault((scen, tool), []).append(rec)
            continue
        rec.update(r)
        for kv in filter(None, extra.split(";")):
            k, _, v = kv.partition("=")
            rec[k] = int(v) if v.isdigit() else v
        rec["cpu"] = cpu
        rec["rss_mb"] = None if rss is None else rss / 1024.0
        wall = rec.get("wall_ms", 0) / 1000.0 or float(dur)
        rec["srv_busy"] = int(srv_ticks) / CLK / wall * 100.0
        if "gen_core_ticks" in rec and cpu is not None:
            # Busy time of the two cores that was not the generator's / nginx's: noise.
            rec["noise_gen"] = max(0.0, (rec["gen_core_ticks"] / CLK - cpu) / wall * 100.0)
            rec["noise_srv"] = max(0.0, (rec["srv_core_ticks"] - int(srv_ticks)) / CLK / wall * 100.0)
            if rec["noise_gen"] > 15 or rec["noise_srv"] > 15:
                NOTES.append(
                    f"{scen} {tool} rep {rep}: other processes used {rec['noise_gen']:.0f} % of the "
                    f"generator's core and {rec['noise_srv']:.0f} % of nginx's core"
                    + (f" (after {rec['retries']} retries)" if rec.get("retries") else "")
                )
        c = r["completed"]
        if cpu is not None and c:
            rec["cpu_us_req"] = cpu / c * 1e6
            rec["cpu_s_100k"] = cpu / c * 1e5
            rec["cpu_ms_hs"] = cpu / c * 1e3
        if r.get("failed"):
            NOTES.append(f"{scen} {tool} rep {rep}: {r['failed']} failed requests")
        if r.get("overloaded"):
            NOTES.append(f"{scen} {tool} rep {rep}: the generator reported itself OVERLOADED")
        if rec.get("sleeps") is not None and rec.get("sent"):
            rec["sleeps_req"] = rec["sleeps"] / rec["sent"]
        target = {"B": M.get("rate_b"), "I": M.get("rate_b"), "C": M.get("rate_c"), "D": M.get("rate_d"), "E": "1000",
                  "F": M.get("rate_f"), "H": M.get("rate_h")}.get(scen)
        if target and r.get("rate") is not None and r["rate"] < 0.99 * float(target):
            NOTES.append(
                f"{scen} {tool} rep {rep}: achieved {r['rate']:.0f} req/s, below 99 % of {target}"
            )
        if scen == "D" and "hs_conns" in rec:
            if rec.get("hs_reused"):
                NOTES.append(f"D {tool} rep {rep}: {rec['hs_reused']} resumed TLS sessions (nginx log)")
            if rec.get("hs_multi"):
                NOTES.append(f"D {tool} rep {rep}: {rec['hs_multi']} connections carried >1 request")
        RUNS.setdefault((scen, tool), []).append(rec)


def med(scen, tool, key):
    vals = [r[key] for r in RUNS.get((scen, tool), []) if r.get(key) is not None]
    return statistics.median(vals) if vals else None


def fmt(v, digits=2):
    if v is None:
        return "n/a"
    if isinstance(v, str):
        return v
    if abs(v) >= 1000:
        return f"{v:,.0f}"
    return f"{v:.{digits}f}"


ROWS = []


def row(scen, metric, ib, peer, ratio=None, goal="", ok=None, digits=2):
    if goal:
        result = "n/a" if ok is None else ("ok" if ok else "**MISSED**")
    else:
        result = ""
    ROWS.append((scen, metric, fmt(ib, digits), fmt(peer, digits), fmt(ratio), goal, result))


def ratio_row(scen, metric, key, peer, limit, digits=2):
    a, b = med(scen, "ingressbench", key), med(scen, peer, key)
    r = a / b if a is not None and b else None
    row(scen, metric, a, b, r, f"<= {limit}x {peer}", None if r is None else r <= limit, digits)


def info_row(scen, metric, key, peer, digits=2):
    a, b = med(scen, "ingressbench", key), med(scen, peer, key) if peer else None
    r = a / b if a is not None and b else None
    row(scen, metric, a, b, r, digits=digits)


def p50_row(scen, peer):
    a, b = med(scen, "ingressbench", "p50"), med(scen, peer, "p50")
    d = None if a is None or b is None else a - b
    # The goal is "no millisecond floor": at most 0.1 ms above the peer's p50. Below it
    # is fine (the peer's own send delay is inside its corrected latency).
    row(scen, "p50 latency, corrected (ms)", a, b, None,
        "<= peer + 0.1 ms" + (f" (diff {d:+.3f})" if d is not None else ""),
        None if d is None else d <= 0.1, 3)


dur = M.get("dur", "10 15 15 10 10").split()
A = f"A. --max, 50 conns, 1 thread, {dur[0]} s, HTTP"
B = f"B. {int(M['rate_b']):,} req/s, 100 conns, {dur[1]} s, HTTP"
C = f"C. {int(M['rate_c']):,} req/s, 100 conns, {dur[2]} s, TLS 1.3"
D = f"D. new TLS 1.3 conn per request (full handshake), {M['rate_d']} req/s, {M['conn_d']} conns, {dur[3]} s"
E = f"E. 10,000 conns, 1,000 req/s, {dur[4]} s, HTTP"
dur_fg = M.get("dur_fg", "15 10").split()
F = (f"F. study S1's load: {int(M.get('rate_f', 30000)):,} req/s, {int(M.get('conn_f', 1000)):,} conns, "
     f"{dur_fg[0]} s, TLS 1.2")
G = (f"G. latency accuracy: a server frozen 1 s of every 5 s, {int(M.get('rate_g', 1500)):,} req/s, 50 conns, "
     f"{dur_fg[1]} s, HTTP (true p90 500 ms, p99 950 ms)")

ratio_row("A", "CPU per request (µs)", "cpu_us_req", "wrk", 0.8)
info_row("A", "throughput (req/s)", "rate", "wrk", 0)
info_row("A", "nginx core busy (%)", "srv_busy", "wrk", 0)
for s, limit in (("B", 0.5), ("C", 0.7)):
    ratio_row(s, "CPU per 100k requests (s)", "cpu_s_100k", "oha", limit)
    info_row(s, "achieved rate (req/s)", "rate", "oha", 0)
    p50_row(s, "oha")
    info_row(s, "p99 latency, corrected (ms)", "p99", "oha")
    lag = med(s, "ingressbench", "lag_p99_us")
    if s == "B":
        row(s, "generator lag p99 (µs)", lag, None, None, "<= 50 µs", None if lag is None else lag <= 50, 1)
    else:
        row(s, "generator lag p99 (µs)", lag, None, digits=1)
    info_row(s, "nginx core busy (%)", "srv_busy", "oha", 0)
    info_row(s, "generator sleeps per request", "sleeps_req", None)
# I: ingressbench with a 1 ms send window against B's oha runs (the same reps).
a, b = med("I", "ingressbench", "cpu_s_100k"), med("B", "oha", "cpu_s_100k")
r = a / b if a is not None and b else None
row("I", "CPU per 100k requests (s)", a, b, r, "<= 1.0x oha", None if r is None else r <= 1.0)
a, b = med("I", "ingressbench", "p50"), med("B", "oha", "p50")
d = None if a is None or b is None else a - b
row("I", "p50 latency, corrected (ms)", a, b, None,
    "<= peer + 0.1 ms" + (f" (diff {d:+.3f})" if d is not None else ""), None if d is None else d <= 0.1, 3)
a, b = med("I", "ingressbench", "p99"), med("B", "oha", "p99")
row("I", "p99 latency, corrected (ms)", a, b, a / b if a is not None and b else None)
lag = med("I", "ingressbench", "lag_p99_us")
row("I", "generator lag p99 (µs)", lag, None, digits=1)
row("I", "generator sleeps per request", med("I", "ingressbench", "sleeps_req"), None)
ratio_row("D", "CPU per full handshake (ms)", "cpu_ms_hs", "oha", 0.8, 3)
info_row("D", "handshakes (completed requests)", "completed", "oha", 0)
info_row("D", "new connections seen by nginx", "hs_conns", "oha", 0)
info_row("D", "nginx core busy (%)", "srv_busy", "oha", 0)
ratio_row("F", "CPU per 100k requests (s)", "cpu_s_100k", "oha", 0.5)
info_row("F", "achieved rate (req/s)", "rate", "oha", 0)
lag = med("F", "ingressbench", "lag_p99_us")
row("F", "generator lag p99 (µs)", lag, None, None, "<= 100 µs", None if lag is None else lag <= 100, 1)
info_row("F", "p50 latency, corrected (ms)", "p50", "oha", 3)
info_row("F", "p99 latency, corrected (ms)", "p99", "oha")
info_row("F", "nginx core busy (%)", "srv_busy", "oha", 0)
for key, truth in (("p90", 500.0), ("p99", 950.0)):
    a, b = med("G", "ingressbench", key), med("G", "oha", key)
    err = None if a is None else abs(a - truth) / truth
    row("G", f"{key} latency, corrected (ms; truth {truth:.0f})", a, b, None,
        "within 5 % of the truth" + ("" if err is None else f" ({100 * err:.1f} %)"),
        None if err is None else err <= 0.05, 1)
info_row("G", "requests measured", "completed", "oha", 0)
cut = med("G", "oha", "cut")
if cut:
    row("G", "requests oha's deadline cut (left out of its percentiles)", None, cut, None, digits=0)
rss = med("E", "ingressbench", "rss_mb")
row("E", "peak RSS (MB)", rss, None, None, "< 100 MB", None if rss is None else rss < 100)
info_row("E", "achieved rate (req/s)", "rate", None, 0)
rss_h = med("H", "ingressbench", "rss_mb")
rss_v = med("H", "vegeta", "rss_mb")
row("H", "peak RSS (MB)", rss_h, rss_v, rss_h / rss_v if rss_h is not None and rss_v else None,
    "< 100 MB", None if rss_h is None else rss_h < 100, 1)
info_row("H", "CPU per request (µs)", "cpu_us_req", "vegeta")
info_row("H", "achieved rate (req/s)", "rate", "vegeta", 0)
info_row("H", "p99 latency (ms; Vegeta's is uncorrected)", "p99", "vegeta", 3)

soak_path = os.path.join(DIR, "soak.tsv")
if os.path.exists(soak_path):
    samples = []
    with open(soak_path) as f:
        for line in f:
            t, kb = line.split()
            samples.append((int(t), int(kb) / 1024.0))
    after = [mb for t, mb in samples if t >= 60]
    if len(after) >= 2:
        base, top, last = after[0], max(after), after[-1]
        growth = top - base
        flat = growth <= max(1.0, 0.05 * base)
        row("S", f"RSS at 1 min / max after / at end (MB), {M.get('soak_s')} s run",
            f"{base:.1f} / {top:.1f} / {last:.1f}", None, None,
            "flat after 1 min (growth <= max(1 MB, 5 %))", flat)
    else:
        row("S", "RSS flat after 1 min", None, None, None, "flat after 1 min", None)

mix = M.get("mix", "5000 50").split()
H = (f"H. a request mix of {int(mix[0]):,} targets over {mix[1]} hosts (one targets file for both), "
     f"{int(M.get('rate_h', 5000)):,} req/s, 100 conns, {M.get('dur_h', '10')} s, HTTP")
I = f"I. as B, with --send-window 1ms (the peers' 1 ms batching), against B's oha runs"
peer_of = {"A": "wrk", "B": "oha", "C": "oha", "D": "oha", "E": "", "F": "oha", "G": "oha", "H": "vegeta", "I": "oha",
           "S": ""}
title = {"A": A, "B": B, "C": C, "D": D, "E": E, "F": F, "G": G, "H": H, "I": I,
         "S": f"Soak: {int(M['rate_b']):,} req/s, 100 conns"}

print(f"# ingressbench benchmark, {M.get('date')}")
print()
print(f"- Machine: {M.get('cpu')}, {M.get('cores')} cores, kernel {M.get('kernel')}, "
      f"load average at start {M.get('loadavg')}")
print(f"- Peers: {M.get('wrk')}; {M.get('oha')}; vegeta {M.get('vegeta')}; {M.get('nginx')} ({M.get('openssl')})")
print(f"- ingressbench: {M.get('ingressbench')}")
print(f"- Generator pinned to CPU {M.get('gen_cpu')}, nginx (1 worker) to CPU {M.get('srv_cpu')}; "
      f"priority: {M.get('nice')}; medians of {M.get('reps')} interleaved reps" + (" (QUICK smoke: short runs)" if M.get("quick") == "1" else ""))
print()
print("| Scenario | Metric | ingressbench | peer | ratio | goal | result |")
print("|---|---|---|---|---|---|---|")
last = None
for scen, metric, a, b, r, goal, result in ROWS:
    name = title[scen] if scen != last else ""
    if scen != last and peer_of[scen]:
        name += f" (peer: {peer_of[scen]})"
    last = scen
    print(f"| {name} | {metric} | {a} | {b if b != 'n/a' or peer_of[scen] else ''} | "
          f"{r if r != 'n/a' else ''} | {goal} | {result} |")
print()
if NOTES:
    print("Notes (runs that are not clean measurements):")
    print()
    for n in NOTES:
        print(f"- {n}")
    print()
if os.path.exists(soak_path):
    print("Soak RSS samples (s: MB): " + ", ".join(f"{t}: {mb:.1f}" for t, mb in samples))
    print()
print("Every run (CPU = user+sys seconds of the generator process):")
print()
print("| Scenario | tool | rep | exit | CPU (s) | completed | rate (req/s) | CPU/req (µs) | p50 (ms) | peak RSS (MB) | nginx busy (%) | other load gen/srv core (%) | retries |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
for (scen, tool), recs in sorted(RUNS.items()):
    for r in sorted(recs, key=lambda r: r["rep"]):
        print(f"| {scen} | {tool} | {r['rep']} | {r['rc']} | {fmt(r.get('cpu'))} | "
              f"{fmt(r.get('completed'), 0)} | {fmt(r.get('rate'), 0)} | {fmt(r.get('cpu_us_req'))} | "
              f"{fmt(r.get('p50'), 3)} | {fmt(r.get('rss_mb'), 1)} | {fmt(r.get('srv_busy'), 0)} | "
              f"{fmt(r.get('noise_gen'), 0)} / {fmt(r.get('noise_srv'), 0)} | {r.get('retries', '')} |")
