"""The side-by-side comparison: ringscan, DuckDB, Polars and the in-memory baseline on
the same files, in the same run, interleaved.

    benches/compare/run [--suites all|pushdown,pages,lookup,distinct,generate,ring]
                        [--rows N] [--repeat N] [--chunk K] [--warmup N] ...

For each query suite: `ringscan bench <suite> --list-json` generates the data on first
use and gives the scenarios (SQL for the SQL engines, the same query as a shape for the
baseline) and the issue's targets. Per scenario, every engine runs in its own fresh
process (DuckDB and Polars in worker.py, the baseline in `ringscan __bench-side
baseline`, ringscan as `ringscan query --repeat K --stats-json F`), after `--warmup`
untimed runs, in rounds of `--chunk` runs per engine with the engine order rotating
each round. Every engine's row count is checked against the others'.

Writes benches/results/<suite>.json, <suite>.md (tables, ratios, targets) and
<suite>.png (latency per scenario per engine, log scale).
"""

import argparse
import datetime
import json
import math
import os
import platform
import re
import select
import shlex
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.environ.get("RINGSCAN_REPO") or os.path.abspath(os.path.join(HERE, "..", ".."))
TARGET = os.environ.get("RINGSCAN_TARGET") or os.environ.get("CARGO_TARGET_DIR") or os.path.join(REPO, "target")
QUERY_SUITES = ["pushdown", "pages", "lookup", "distinct"]
ALL_SUITES = QUERY_SUITES + ["generate", "ring"]
ENGINES = ["ringscan", "duckdb", "polars", "baseline"]
NOT_AVAILABLE = "ringscan query is not available in this build"
REPLY_TIMEOUT_S = 600
DEFAULT_REPEAT = {"pushdown": 50, "pages": 10, "lookup": 200, "distinct": 5}


def log(*args):
    print("compare:", *args, file=sys.stderr, flush=True)


def percentile(sorted_values, q):
    """Nearest rank, as ringscan_benches::stats."""
    if not sorted_values:
        return None
    rank = max(1, min(len(sorted_values), math.ceil(q * len(sorted_values))))
    return sorted_values[rank - 1]


def summarize(samples):
    if not samples:
        return None
    s = sorted(samples)
    return {
        "n": len(s),
        "mean_us": sum(s) / len(s),
        "p50_us": percentile(s, 0.50),
        "p95_us": percentile(s, 0.95),
        "p99_us": percentile(s, 0.99),
        "min_us": s[0],
        "max_us": s[-1],
    }


# ---------------------------------------------------------------------------- engines


class ProtocolEngine:
    """A worker process speaking the side protocol (DuckDB, Polars, the baseline)."""

    def __init__(self, name, argv):
        self.name = name
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1
        )

    def request(self, line):
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        # One request in flight, one line per reply: the buffer is empty here, so
        # select on the pipe bounds the wait.
        ready, _, _ = select.select([self.proc.stdout], [], [], REPLY_TIMEOUT_S)
        if not ready:
            self.proc.kill()
            raise RuntimeError(f"{self.name} gave no answer to {line!r} within {REPLY_TIMEOUT_S} s; killed")
        reply = self.proc.stdout.readline()
        if not reply:
            raise RuntimeError(f"{self.name} exited before answering {line!r}")
        reply = reply.strip()
        if reply.startswith("error"):
            raise RuntimeError(reply[5:].strip())
        if not reply.startswith("ok"):
            raise RuntimeError(f"{self.name} answered {reply!r}")
        return reply[2:].split()

    def prepare(self, scenario):
        self.request(f"prepare {scenario['name']}")

    def cold(self, scenario):
        self.request(f"cold {scenario['name']}")

    def run(self, scenario, n):
        """n timed runs: [(micros, rows, bytes_read|None)]."""
        out = []
        for _ in range(n):
            f = self.request(f"run {scenario['name']}")
            out.append((float(f[0]), int(f[1]), None if f[2] == "-" else int(f[2])))
        return out, {}

    def peak_rss(self):
        try:
            return int(self.request("rss")[0])
        except Exception:
            return None

    def close(self):
        try:
            self.proc.stdin.write("quit\n")
            self.proc.stdin.flush()
            self.proc.wait(timeout=10)
        except Exception:
            self.proc.kill()
            self.proc.wait()


class RingscanEngine:
    """`ringscan query --repeat K --stats-json F` per chunk; in-engine latency from F."""

    def __init__(self, exe, data_dir, cold_cmd, warmup=0):
        self.exe = exe
        self.data_dir = data_dir
        self.cold_cmd = cold_cmd
        self.warmup = warmup
        self.rss = None
        self.stats = []

    def prepare(self, scenario):
        pass

    def cold(self, scenario):
        cmd = self.cold_cmd.format(ringscan=shlex.quote(self.exe), data=shlex.quote(self.data_dir))
        r = subprocess.run(cmd, shell=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        # No daemon running is already cold (the first cold run of a fresh data dir).
        if r.returncode != 0 and "no daemon running" not in r.stdout + r.stderr:
            raise RuntimeError(f"cannot make ringscan cold with `{cmd}`: {r.stderr.strip()[:200]}")

    def run(self, scenario, n):
        with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
            stats_path = f.name
        argv = [self.exe, "query", "--data", self.data_dir, "--format", "csv",
                "--repeat", str(n), "--stats-json", stats_path]
        if not scenario.get("cold") and self.warmup > 0:
            # Each call is a new executor process: warm its session in that process, as
            # the other engines' persistent workers were warmed once (--warmup).
            argv += ["--warmup", str(self.warmup)]
        if not scenario.get("result_cache"):
            argv.append("--no-cache")
        argv.append(scenario["sql"])
        # stderr to a file, not a pipe: wait4 (for this child's own ru_maxrss) must not
        # wait on a child blocked writing to a full pipe.
        with tempfile.TemporaryFile("w+") as errf:
            proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=errf, text=True)
            watchdog = threading.Timer(REPLY_TIMEOUT_S, proc.kill)
            watchdog.start()
            try:
                _, status, usage = os.wait4(proc.pid, 0)
            finally:
                watchdog.cancel()
            proc.returncode = os.waitstatus_to_exitcode(status)
            errf.seek(0)
            err = errf.read()
        try:
            if proc.returncode != 0:
                raise RuntimeError(f"ringscan query failed ({proc.returncode}): {err.strip()[:300]}")
            with open(stats_path) as f:
                stats = json.load(f)
        finally:
            os.unlink(stats_path)
        # The executor's own peak (VmHWM) from its stats; wait4's ru_maxrss is not that:
        # execve carries over the peak of the image it replaced, this harness's copy
        # between fork and exec (it showed this script's 81 MiB for every query).
        own = (stats.get("counters") or {}).get("executor_peak_rss_bytes")
        peak = int(own) if isinstance(own, (int, float)) and own > 0 else usage.ru_maxrss * 1024
        self.rss = max(self.rss or 0, peak)
        self.stats.append(stats)
        lat = stats.get("latency_us", {})
        rows = int(stats.get("rows_returned", -1))
        scan = stats.get("scan") or {}
        bytes_read = scan.get("bytes_read")
        samples = lat.get("samples")
        if isinstance(samples, list) and len(samples) == n:
            return [(float(s), rows, bytes_read) for s in samples], stats
        # Only the call's summary: one pseudo-sample per run at the call's p50 would
        # hide the tail, so keep the call's figures and merge them in `merge_ringscan`.
        return [(float(lat.get("p50", 0.0)), rows, bytes_read)] * n, stats

    def peak_rss(self):
        return self.rss

    def close(self):
        pass


def ringscan_available(exe):
    r = subprocess.run([exe, "query", "--help"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0 or "--stats-json" not in r.stdout:
        return False
    return True


def merge_ringscan(stats_list):
    """Latency of ringscan from its per-call stats when it gives no raw samples: mean
    weighted by runs, percentiles as the median of the calls' percentiles."""
    if not stats_list:
        return None
    lat = [s.get("latency_us", {}) for s in stats_list]
    if all(isinstance(l.get("samples"), list) for l in lat):
        return summarize([float(x) for l in lat for x in l["samples"]])

    def med(key):
        vals = [float(l[key]) for l in lat if key in l]
        return statistics.median(vals) if vals else None

    return {"n": len(lat), "mean_us": med("mean"), "p50_us": med("p50"), "p95_us": med("p95"),
            "p99_us": med("p99"), "min_us": None, "max_us": None, "merged_from_calls": True}


# ----------------------------------------------------------------------------- suites


def ringscan_cmd(args, *rest):
    r = subprocess.run([args.ringscan, *rest], stdout=subprocess.PIPE, text=True)
    if r.returncode != 0:
        sys.exit(f"compare: `ringscan {' '.join(rest)}` failed ({r.returncode})")
    return r.stdout


def make_engine(name, args, spec, spec_path):
    py = sys.executable
    if name in ("duckdb", "polars"):
        return ProtocolEngine(name, [py, os.path.join(HERE, "worker.py"), name, spec_path])
    if name == "baseline":
        return ProtocolEngine(name, [args.ringscan, "__bench-side", "baseline", "--suite",
                                     spec["suite"], "--data", spec["data_dir"]])
    return RingscanEngine(args.ringscan, spec["data_dir"], args.cold_cmd, args.warmup)


def run_scenario(args, spec, spec_path, scenario, engines, repeat):
    live, results = {}, {}
    for name in engines:
        results[name] = {"samples": [], "rows": None, "bytes_read": None, "error": None, "peak_rss_bytes": None}
        if name == "ringscan" and not args.ringscan_ok:
            results[name]["error"] = NOT_AVAILABLE
            continue
        try:
            e = make_engine(name, args, spec, spec_path)
            e.prepare(scenario)
            live[name] = e
        except Exception as ex:
            results[name]["error"] = str(ex)

    def step(name, n, timed):
        e, r = live[name], results[name]
        if r["error"]:
            return
        try:
            if scenario["cold"]:
                runs = []
                for _ in range(n):
                    e.cold(scenario)
                    runs += e.run(scenario, 1)[0]
            else:
                runs = e.run(scenario, n)[0]
        except Exception as ex:
            r["error"] = str(ex)
            return
        for micros, rows, bytes_read in runs:
            if r["rows"] is not None and rows != r["rows"]:
                r["error"] = f"returned {rows} rows after {r['rows']}: answers differ between runs"
                return
            r["rows"], r["bytes_read"] = rows, bytes_read
            if timed:
                r["samples"].append(micros)

    order = [n for n in engines if n in live]
    for name in order:
        step(name, args.warmup, False)
    done, rnd = 0, 0
    while done < repeat:
        n = min(args.chunk, repeat - done)
        for k in range(len(order)):
            step(order[(rnd + k) % len(order)], n, True)
        done += n
        rnd += 1
    for name, e in live.items():
        results[name]["peak_rss_bytes"] = e.peak_rss()
        e.close()
        if name == "ringscan":
            results[name]["latency"] = merge_ringscan(e.stats) if not results[name]["error"] else None
            results[name]["ringscan_stats"] = e.stats[-1] if e.stats else None
    for name, r in results.items():
        if "latency" not in r:
            r["latency"] = summarize(r["samples"]) if not r["error"] else None
    counts = {n: r["rows"] for n, r in results.items() if not r["error"] and r["rows"] is not None}
    agree = len(set(counts.values())) <= 1
    if not agree:
        print(f"\n!!!!! ROW COUNT MISMATCH in {spec['suite']}/{scenario['name']}: {counts}\n"
              f"!!!!! SQL: {scenario['sql']}\n", file=sys.stderr, flush=True)
    return {"name": scenario["name"], "description": scenario["description"], "sql": scenario["sql"],
            "cold": scenario["cold"], "engines": results, "row_counts": counts, "rows_agree": agree}


def table_bytes(spec):
    total = 0
    for s in {sc["shape"]["table"] for sc in spec["scenarios"]}:
        for root, _, files in os.walk(os.path.join(spec["data_dir"], s)):
            total += sum(os.path.getsize(os.path.join(root, f)) for f in files if f.endswith(".parquet"))
    return total


def p50(res, engine):
    lat = res["engines"].get(engine, {}).get("latency")
    return lat and lat.get("p50_us")


def ratio(res, a, b):
    x, y = p50(res, a), p50(res, b)
    return x / y if x and y else None


def check_targets(spec, scenario_results):
    by_name = {r["name"]: r for r in scenario_results}
    out = []
    for t in spec["targets"]:
        r = by_name.get(t["scenario"])
        m = None
        if r:
            if t["versus"] in ("duckdb", "baseline"):
                m = ratio(r, "ringscan", t["versus"])
            elif t["versus"] == "absolute_us":
                m = p50(r, "ringscan")
            elif t["versus"] == "peak_rss_mib":
                b = r["engines"].get("ringscan", {}).get("peak_rss_bytes")
                m = b / 1048576 if b and not r["engines"]["ringscan"]["error"] else None
        out.append({**t, "measured": m, "met": None if m is None else m <= t["max"]})
    return out


def run_query_suite(args, suite):
    extra = ["--data", args.data] + (["--rows", str(args.rows)] if args.rows else [])
    spec = json.loads(ringscan_cmd(args, "bench", suite, "--list-json", *extra))
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(spec, f)
        spec_path = f.name
    repeat = args.repeat or DEFAULT_REPEAT[suite]
    results = []
    try:
        for sc in spec["scenarios"]:
            if args.only and sc["name"] not in args.only:
                continue
            log(f"{suite}/{sc['name']}")
            results.append(run_scenario(args, spec, spec_path, sc, args.engines, repeat))
    finally:
        os.unlink(spec_path)
    return {"suite": suite, "machine": machine(), "date": now(), "command": args.command,
            "repeat": repeat, "chunk": args.chunk, "warmup": args.warmup, "engines": args.engines,
            "data_dir": spec["data_dir"], "data": spec["data"], "params": spec["params"],
            "table_bytes": table_bytes(spec), "scenarios": results,
            "targets": check_targets(spec, results)}


def run_generate(args):
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        path = f.name
    extra = ["--data", args.data, "--json", path] + (["--rows", str(args.rows)] if args.rows else [])
    out = ringscan_cmd(args, "bench", "generate", *extra)
    with open(path) as f:
        report = json.load(f)
    os.unlink(path)
    report.update({"date": now(), "command": args.command, "text": out})
    return report


def run_ring(args):
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        path = f.name
    out = ringscan_cmd(args, "bench", "ring", "--json", path)
    with open(path) as f:
        report = json.load(f)
    os.unlink(path)
    return {"suite": "ring", "machine": machine(), "date": now(), "command": args.command,
            "report": report, "text": out}


# ---------------------------------------------------------------------------- output


def machine():
    model = None
    try:
        with open("/proc/cpuinfo") as f:
            model = next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")), None)
    except OSError:
        pass
    mem = None
    try:
        with open("/proc/meminfo") as f:
            mem = next((int(l.split()[1]) * 1024 for l in f if l.startswith("MemTotal:")), None)
    except OSError:
        pass
    return {"cores": os.cpu_count(), "cpu_model": model, "memory_bytes": mem,
            "os": platform.platform(), "python": platform.python_version()}


def now():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def fmt_us(us):
    if us is None:
        return "-"
    if us >= 100_000:
        return f"{us / 1000:.0f} ms"
    if us >= 1_000:
        return f"{us / 1000:.2f} ms"
    return f"{us:.0f} µs"


def fmt_x(x):
    return "-" if x is None else f"{x:.2f}x"


def fmt_mib(b):
    return "-" if not b else f"{b / 1048576:.1f}"


def markdown_query(report):
    engines = report["engines"]
    lines = [f"### `{report['suite']}`", "",
             f"{report['date']}; {machine_line(report['machine'])}; data: {report['data']['rows']:,} rows "
             f"of `{report['data']['dataset']}` ({report['table_bytes'] / 1048576:.1f} MiB of Parquet); "
             f"{report['repeat']} timed runs per engine after {report['warmup']} warm-up, "
             f"interleaved in rounds of {report['chunk']}.", "",
             "p50 latency; ratios are ringscan's p50 over the other engine's (below 1 is faster).", "",
             "| scenario | " + " | ".join(engines) + " | ringscan/DuckDB | ringscan/Polars | ringscan/baseline | rows |",
             "|---|" + "---:|" * (len(engines) + 4)]
    for r in report["scenarios"]:
        cells = []
        for e in engines:
            er = r["engines"][e]
            cells.append("n/a" if er["error"] else fmt_us(p50(r, e)))
        rows = ", ".join(sorted({str(v) for v in r["row_counts"].values()}))
        flag = "" if r["rows_agree"] else " **MISMATCH**"
        lines.append(f"| {r['name']} | " + " | ".join(cells) + f" | {fmt_x(ratio(r, 'ringscan', 'duckdb'))}"
                     f" | {fmt_x(ratio(r, 'ringscan', 'polars'))} | {fmt_x(ratio(r, 'ringscan', 'baseline'))}"
                     f" | {rows}{flag} |")
    lines += ["", "Mean / p95 / p99 and peak RSS (MiB) of each engine's process:", "",
              "| scenario | engine | mean | p95 | p99 | peak RSS |", "|---|---|---:|---:|---:|---:|"]
    for r in report["scenarios"]:
        for e in engines:
            er = r["engines"][e]
            lat = er.get("latency") or {}
            if er["error"]:
                lines.append(f"| {r['name']} | {e} | n/a: {er['error'][:80]} | | | |")
            else:
                lines.append(f"| {r['name']} | {e} | {fmt_us(lat.get('mean_us'))} | {fmt_us(lat.get('p95_us'))}"
                             f" | {fmt_us(lat.get('p99_us'))} | {fmt_mib(er['peak_rss_bytes'])} |")
    if report["suite"] == "lookup":
        lines += ["", "Lookups per second (1 / mean latency, one client):", "",
                  "| scenario | " + " | ".join(engines) + " |", "|---|" + "---:|" * len(engines)]
        for r in report["scenarios"]:
            cells = []
            for e in engines:
                lat = r["engines"][e].get("latency") or {}
                cells.append(f"{1e6 / lat['mean_us']:,.0f}" if lat.get("mean_us") else "-")
            lines.append(f"| {r['name']} | " + " | ".join(cells) + " |")
    if report["suite"] == "pushdown":
        lines += ["", "Fraction of the table's Parquet bytes read:", "", "| scenario | ringscan | baseline |",
                  "|---|---:|---:|"]
        for r in report["scenarios"]:
            cells = []
            for e in ("ringscan", "baseline"):
                b = r["engines"].get(e, {}).get("bytes_read")
                cells.append("-" if b is None else f"{b / max(report['table_bytes'], 1):.1%}")
            lines.append(f"| {r['name']} | " + " | ".join(cells) + " |")
    lines += ["", "Targets (issue 7):", "", "| scenario | versus | target | measured | met |", "|---|---|---:|---:|---|"]
    for t in report["targets"]:
        met = "not measured" if t["met"] is None else ("yes" if t["met"] else "**MISSED**")
        m = "-" if t["measured"] is None else f"{t['measured']:.3f}"
        lines.append(f"| {t['scenario']} | {t['versus']} | <= {t['max']:.3f} | {m} | {met} |")
    lines += ["", f"![{report['suite']}]({report['suite']}.png)", ""]
    return "\n".join(lines)


def machine_line(m):
    mem = f"{m['memory_bytes'] / 2**30:.1f} GiB" if m.get("memory_bytes") else "? GiB"
    return f"{m.get('cores')} cores, {m.get('cpu_model')}, {mem}"


def markdown_text(report, title):
    return "\n".join([f"### `{title}`", "", f"{report['date']}; {machine_line(report['machine'])}", "",
                      "```", report["text"].rstrip(), "```", ""])


def chart(report, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [r["name"] for r in report["scenarios"]]
    engines = report["engines"]
    fig, ax = plt.subplots(figsize=(10, 0.45 * len(names) * len(engines) / 2 + 2))
    height = 0.8 / len(engines)
    for i, e in enumerate(engines):
        ys = [j + i * height for j in range(len(names))]
        xs = [p50(r, e) or 0 for r in report["scenarios"]]
        ax.barh(ys, xs, height=height, label=e)
    ax.set_yticks([j + 0.4 - height / 2 for j in range(len(names))])
    ax.set_yticklabels(names)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlabel("p50 latency (µs, log scale)")
    ax.set_title(f"{report['suite']}: p50 latency per scenario ({report['date']})")
    ax.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


NOTES_BEGIN, NOTES_END = "<!-- notes: kept across regenerations -->", "<!-- /notes -->"


def lscpu():
    try:
        return subprocess.run(["lscpu"], stdout=subprocess.PIPE, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return "(lscpu not available)"


COUNTER_HEADER = ("| run | process | task clock ms | page faults | context switches | IPC "
                  "| cache misses | peak RSS MiB |")
COUNTER_RULE = "|---|---|---:|---:|---:|---:|---:|---:|"


def counter_values(block):
    """{kind: value} of the measured counters of one `Counters` report (None if absent)."""
    if not isinstance(block, dict):
        return None
    out = {}
    for v in block.get("values") or []:
        if v.get("measured") and v.get("value") is not None:
            out[v["kind"]] = v["value"]
    return out


def counter_rows(run, counters):
    """Table rows (executor, then daemon scan) of one run's `counters` JSON."""
    if not isinstance(counters, dict):
        return []
    sides = []
    if "values" in counters:  # a generator record: one process
        sides.append(("generator", counter_values(counters), None))
    else:
        rss = counters.get("executor_peak_rss_bytes")
        sides.append(("executor", counter_values(counters.get("executor")), rss))
        daemon = counters.get("daemon") or {}
        sides.append(("daemon scan", counter_values(daemon.get("scan")), None))
    rows = []
    for name, values, rss in sides:
        if values is None:
            continue
        def num(kind, scale=1.0, fmt="{:.0f}"):
            return fmt.format(values[kind] / scale) if kind in values else "n/a"
        ipc = "n/a"
        if values.get("cycles"):
            ipc = f"{values.get('instructions', 0) / values['cycles']:.2f}" if "instructions" in values else "n/a"
        rows.append(f"| {run} | {name} | {num('task-clock', 1e6, '{:.1f}')} | {num('page-faults')} "
                    f"| {num('context-switches')} | {ipc} | {num('cache-misses')} "
                    f"| {'-' if rss is None else f'{rss / 2**20:.1f}'} |")
    return rows


def write_results_md(args, path):
    """benches/RESULTS.md from every benches/results/<suite>.md, the machine, the
    command, the counters and the targets; the hand-written notes block is kept."""
    notes = f"{NOTES_BEGIN}\n(Where a target is missed: what the profile shows.)\n{NOTES_END}"
    if os.path.exists(path):
        with open(path) as f:
            old = f.read()
        if NOTES_BEGIN in old and NOTES_END in old:
            notes = old[old.index(NOTES_BEGIN):old.index(NOTES_END) + len(NOTES_END)]
    m = machine()
    parts = ["# Benchmark results", "",
             "Generated by `benches/compare/run` (see the README's Benchmarks section); do not edit",
             "outside the notes block. Re-run it whenever performance work lands.", "",
             f"- date: {getattr(args, 'date', None) or now()}",
             f"- machine: {machine_line(m)}; {m['os']}",
             f"- command: `{args.command}`",
             f"- ringscan: `{args.ringscan}`" + ("" if args.ringscan_ok else f" ({NOT_AVAILABLE})"), "",
             "<details><summary>lscpu</summary>", "", "```", lscpu().rstrip(), "```", "", "</details>", "",
             "## Targets", ""]
    rows = ["| suite | scenario | versus | target | measured | met |", "|---|---|---|---:|---:|---|"]
    counters = []
    for suite in ALL_SUITES:
        jpath = os.path.join(args.out, f"{suite}.json")
        if not os.path.exists(jpath):
            continue
        with open(jpath) as f:
            rep = json.load(f)
        for t in rep.get("targets", []):
            met = "not measured" if t["met"] is None else ("yes" if t["met"] else "**MISSED**")
            v = "-" if t["measured"] is None else f"{t['measured']:.3f}"
            rows.append(f"| {suite} | {t['scenario']} | {t['versus']} | <= {t['max']:.3f} | {v} | {met} |")
        for sc in rep.get("scenarios", []):
            st = (sc["engines"].get("ringscan") or {}).get("ringscan_stats") or {}
            counters += counter_rows(f"{suite}/{sc['name']}", st.get("counters"))
        for run in rep.get("runs", []):
            rec = run.get("record") or {}
            counters += counter_rows(f"generate/{run.get('name', 'run')}", rec.get("counters"))
    parts += rows + ["", "## Counters", "",
                     "ringscan's counters per scenario, per process: the executor (`ringscan query`) and",
                     "the IO daemon's scan threads. IPC and cache misses need hardware counters; `n/a`",
                     "where the machine exposes none (a VM without a PMU).", "",
                     COUNTER_HEADER, COUNTER_RULE]
    parts += counters or ["| - | - | - | - | - | - | - | - |"]
    parts += ["", "## Notes", "", notes, "", "## Suites", ""]
    for suite in ALL_SUITES:
        mpath = os.path.join(args.out, f"{suite}.md")
        if os.path.exists(mpath):
            with open(mpath) as f:
                parts.append(f.read().replace(f"]({suite}.png)", f"](results/{suite}.png)"))
    with open(path, "w") as f:
        f.write("\n".join(parts).rstrip() + "\n")
    log(f"wrote {path}")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--suites", default="all", help="comma-separated, or all")
    p.add_argument("--engines", default=",".join(ENGINES))
    p.add_argument("--only", default="", help="comma-separated scenario names")
    p.add_argument("--rows", help="rows of each suite's table instead of the seed's figure")
    p.add_argument("--repeat", type=int, help="timed runs per scenario and engine")
    p.add_argument("--chunk", type=int, default=5, help="runs per engine per interleaved round")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--data", default=os.path.join(TARGET, "bench-data"))
    p.add_argument("--out", default=os.path.join(REPO, "benches", "results"))
    p.add_argument("--ringscan", help="the ringscan binary [default: build target/release/ringscan]")
    p.add_argument("--cold-cmd", default="{ringscan} daemon stop --data {data}",
                   help="shell command that makes ringscan cold (fresh daemon)")
    p.add_argument("--results-md", default=os.path.join(REPO, "benches", "RESULTS.md"),
                   help="RESULTS.md to regenerate from the results directory ('' for none)")
    p.add_argument("--md-only", action="store_true",
                   help="only rewrite RESULTS.md from the results directory (no runs)")
    args = p.parse_args()
    if args.md_only:
        old_md = open(args.results_md).read() if os.path.exists(args.results_md) else ""
        m = re.search(r"^- command: `(.*)`$", old_md, re.M)
        args.command = m.group(1) if m else "(unknown)"
        r = re.search(r"^- ringscan: `(.*?)`", old_md, re.M)
        args.ringscan, args.ringscan_ok = (r.group(1) if r else "(unknown)"), True
        d = re.search(r"^- date: (.*)$", old_md, re.M)
        args.date = d.group(1) if d else None
        write_results_md(args, args.results_md)
        return
    args.command = "benches/compare/run " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    args.engines = [e for e in args.engines.split(",") if e]
    args.only = [s for s in args.only.split(",") if s]
    args.chunk = max(1, args.chunk)
    suites = ALL_SUITES if args.suites == "all" else args.suites.split(",")
    for s in suites:
        if s not in ALL_SUITES:
            sys.exit(f"compare: unknown suite {s!r} (choose from {', '.join(ALL_SUITES)})")
    if not args.ringscan:
        log("building ringscan (cargo build --release)")
        subprocess.run(["cargo", "build", "--release", "--bin", "ringscan"], cwd=REPO, check=True)
        args.ringscan = os.path.join(TARGET, "release", "ringscan")
    args.ringscan = os.path.abspath(args.ringscan)
    args.ringscan_ok = ringscan_available(args.ringscan)
    if "ringscan" in args.engines and not args.ringscan_ok:
        log(f"{NOT_AVAILABLE}: the ringscan column stays empty; DuckDB, Polars and the baseline still run")
    os.makedirs(args.out, exist_ok=True)
    for suite in suites:
        started = time.time()
        if suite in QUERY_SUITES:
            report = run_query_suite(args, suite)
            # The ringscan engine started the suite's daemon: leave nothing running.
            if args.ringscan_ok and report.get("data_dir"):
                subprocess.run([args.ringscan, "daemon", "stop", "--data", report["data_dir"]],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            md = markdown_query(report)
            chart(report, os.path.join(args.out, f"{suite}.png"))
        elif suite == "generate":
            report = run_generate(args)
            md = markdown_text(report, "generate")
        else:
            report = run_ring(args)
            md = markdown_text(report, "ring")
        with open(os.path.join(args.out, f"{suite}.json"), "w") as f:
            json.dump(report, f, indent=2)
            f.write("\n")
        with open(os.path.join(args.out, f"{suite}.md"), "w") as f:
            f.write(md)
        print(md)
        log(f"{suite} done in {time.time() - started:.0f} s -> {args.out}/{suite}.{{json,md{',png' if suite in QUERY_SUITES else ''}}}")

    if args.results_md:
        write_results_md(args, args.results_md)


if __name__ == "__main__":
    main()
