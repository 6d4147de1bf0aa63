"""TPC-H on ringscan and DuckDB: the 22 queries (queries/qNN.sql, the spec's validation
parameters) over the same tpchgen-cli Parquet files, answers compared, latency side by side.

    benches/tpch/run [--sf 1] [--data DIR] [--ringscan BIN] [--queries 1,3,6]
                     [--repeat 3] [--warmup 1] [--threads 2] [--check-only] [--out PREFIX]

Data: `tpchgen-cli parquet -s SF` (into DIR/.tpch-gen, then each table's file(s) moved to
DIR/<table>/part-<k>.parquet); DIR/.tpch-sf records what was generated, and a later run
with the same scale factor reuses the files.

Per query, in this order: DuckDB (in this process, `SET threads`, one view per table over
read_parquet) answers, then runs --warmup untimed and --repeat timed times (median);
ringscan answers with `query --format json --no-cache` and is timed with one
`query --no-cache --repeat R --warmup W --stats-json F` (in-engine latency, median of its
samples). Answers are compared with tests/differential/check.py's functions (row and
column counts, values by position, in order when the query has an ORDER BY, floats and
decimals numerically within a relative 1e-9).

Writes PREFIX.json and PREFIX.md (a table for benches/RESULTS.md); --check-only compares
answers only (one run each, no timing) and writes them only when --out is given. Exits 1
when any answer differs or any query fails.
"""

import argparse
import datetime
import decimal
import json
import math
import os
import platform
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.environ.get("RINGSCAN_REPO") or os.path.abspath(os.path.join(HERE, "..", ".."))
TARGET = os.environ.get("RINGSCAN_TARGET") or os.environ.get("CARGO_TARGET_DIR") or os.path.join(REPO, "target")
QUERY_DIR = os.path.join(HERE, "queries")
TABLES = ["lineitem", "orders", "customer", "part", "partsupp", "supplier", "nation", "region"]
MARKER = ".tpch-sf"
GEN_TMP = ".tpch-gen"

sys.path.insert(0, os.path.join(REPO, "tests", "differential"))
import check  # noqa: E402  (canon, values_equal, sort_key, compare, statements)
import duckdb  # noqa: E402


def log(*args):
    print("tpch:", *args, file=sys.stderr, flush=True)


def sf_text(sf):
    """0.1 -> '0.1', 1.0 -> '1': the scale factor as named in paths and reports."""
    return format(sf, "g")


def run_text(argv):
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=60).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


# ---------------------------------------------------------------------------- data


def tpchgen_bin():
    sibling = os.path.join(os.path.dirname(sys.executable), "tpchgen-cli")
    found = sibling if os.path.exists(sibling) else shutil.which("tpchgen-cli")
    if not found:
        sys.exit("tpch: tpchgen-cli not found (run through benches/tpch/run, which installs it)")
    return found


def tpchgen_version(binary):
    return run_text([binary, "--version"]).replace("tpchgen-cli", "").strip() or "?"


def read_marker(data_dir):
    try:
        with open(os.path.join(data_dir, MARKER)) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def table_files(data_dir, table):
    d = os.path.join(data_dir, table)
    if not os.path.isdir(d):
        return []
    return sorted(os.path.join(d, n) for n in os.listdir(d) if n.endswith(".parquet"))


def stop_daemon(ringscan, data_dir):
    if ringscan and os.path.exists(ringscan) and os.path.isdir(data_dir):
        subprocess.run([ringscan, "daemon", "stop", "--data", data_dir],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def part_number(name):
    """k of tpchgen-cli's `<table>.<k>.parquet` (numeric order: 2 before 10)."""
    digits = re.findall(r"\d+", name)
    return int(digits[-1]) if digits else 0


def ensure_data(args):
    """Generates DIR/<table>/part-<k>.parquet for the scale factor unless DIR holds it."""
    gen = tpchgen_bin()
    want = {"sf": sf_text(args.sf), "parts": args.parts, "generator": "tpchgen-cli " + tpchgen_version(gen)}
    have = read_marker(args.data)
    if have == want and all(table_files(args.data, t) for t in TABLES):
        log(f"reusing SF {want['sf']} data in {args.data}")
        return want
    if os.path.isdir(args.data):
        ours = set(TABLES) | {MARKER, GEN_TMP, ".ringscan"}
        foreign = [n for n in os.listdir(args.data) if n not in ours]
        if foreign:
            sys.exit(f"tpch: {args.data} holds {', '.join(sorted(foreign)[:5])}, which this harness did "
                     "not write; refusing to regenerate there (choose another --data)")
    if have:
        log(f"{args.data} holds {have}; regenerating for {want}")
    # A daemon of this directory may hold the old files' footers.
    stop_daemon(args.ringscan, args.data)
    os.makedirs(args.data, exist_ok=True)
    marker = os.path.join(args.data, MARKER)
    if os.path.exists(marker):
        os.unlink(marker)
    tmp = os.path.join(args.data, GEN_TMP)
    shutil.rmtree(tmp, ignore_errors=True)
    for t in TABLES:
        shutil.rmtree(os.path.join(args.data, t), ignore_errors=True)
    argv = [gen, "parquet", "--scale-factor", want["sf"], "--output-dir", tmp, "--no-progress", "--quiet"]
    if args.parts > 1:
        argv += ["--parts", str(args.parts)]
    log("generating:", " ".join(shlex.quote(a) for a in argv))
    started = time.time()
    subprocess.run(argv, check=True)
    for t in TABLES:
        # One file per table: <tmp>/<table>.parquet; with --parts: <tmp>/<table>/<table>.<k>.parquet.
        single = os.path.join(tmp, f"{t}.parquet")
        if os.path.exists(single):
            sources = [single]
        else:
            d = os.path.join(tmp, t)
            names = [n for n in os.listdir(d) if n.endswith(".parquet")] if os.path.isdir(d) else []
            sources = [os.path.join(d, n) for n in sorted(names, key=part_number)]
        if not sources:
            sys.exit(f"tpch: tpchgen-cli wrote no {t} file under {tmp}")
        os.makedirs(os.path.join(args.data, t))
        for k, src in enumerate(sources):
            os.rename(src, os.path.join(args.data, t, f"part-{k}.parquet"))
    shutil.rmtree(tmp)
    with open(marker, "w") as f:
        json.dump(want, f)
        f.write("\n")
    log(f"generated SF {want['sf']} in {time.time() - started:.1f} s -> {args.data}")
    return want


def data_summary(data_dir):
    files = [f for t in TABLES for f in table_files(data_dir, t)]
    return {"files": len(files), "bytes": sum(os.path.getsize(f) for f in files)}


# ---------------------------------------------------------------------------- engines


def query_sql(n):
    path = os.path.join(QUERY_DIR, f"q{n:02d}.sql")
    stmts = check.statements(path)
    if len(stmts) != 1:
        sys.exit(f"tpch: {path} holds {len(stmts)} statements, not one")
    return stmts[0]


def duck_connection(data_dir, threads):
    con = duckdb.connect()
    con.execute(f"SET threads = {int(threads)}")
    con.execute("SET TimeZone = 'UTC'")
    for t in TABLES:
        glob = os.path.join(os.path.abspath(data_dir), t, "*.parquet").replace("'", "''")
        con.execute(f"CREATE VIEW {t} AS SELECT * FROM read_parquet('{glob}')")
    return con


def duck_answer(con, sql):
    return [list(r) for r in con.execute(sql).fetchall()]


def duck_time(con, sql, warmup, repeat):
    """Milliseconds per timed run (the result fetched as Arrow, as ringscan's is)."""
    for _ in range(warmup):
        con.execute(sql).to_arrow_table()
    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        con.execute(sql).to_arrow_table()
        samples.append((time.perf_counter() - t0) * 1000)
    return samples


def short(text, n=400):
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 3] + "..."


def ring_answer(args, sql):
    """(rows, error): rows as lists, numbers with a fraction kept as Decimal (their scale)."""
    argv = [args.ringscan, "query", "--data", args.data, "--format", "json", "--no-cache", sql]
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=args.timeout)
    except subprocess.TimeoutExpired:
        return None, f"timed out after {args.timeout} s"
    if proc.returncode != 0:
        return None, short(proc.stderr.strip() or f"exit {proc.returncode}")
    rows = []
    for line in proc.stdout.splitlines():
        if line.strip():
            rows.append(list(json.loads(line, parse_float=decimal.Decimal).values()))
    return rows, None


def ring_time(args, sql):
    """(samples in ms, stats, error) from one `query --repeat --warmup --stats-json`."""
    fd, stats_path = tempfile.mkstemp(prefix="tpch-stats-", suffix=".json")
    os.close(fd)
    argv = [args.ringscan, "query", "--data", args.data, "--format", "csv", "--no-cache",
            "--repeat", str(args.repeat), "--warmup", str(args.warmup), "--stats-json", stats_path, sql]
    try:
        try:
            proc = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                  timeout=args.timeout * (args.repeat + args.warmup))
        except subprocess.TimeoutExpired:
            return None, None, "timed out"
        if proc.returncode != 0:
            return None, None, short(proc.stderr.strip() or f"exit {proc.returncode}")
        with open(stats_path) as f:
            stats = json.load(f)
    finally:
        os.unlink(stats_path)
    lat = stats.get("latency_us") or {}
    samples = lat.get("samples")
    if isinstance(samples, list) and samples:
        return [s / 1000 for s in samples], stats, None
    if lat.get("p50") is not None:
        return [lat["p50"] / 1000], stats, None
    return None, stats, "no latency_us in --stats-json"


# ---------------------------------------------------------------------------- answers


def plain(v):
    """A ringscan value as check.py's json.loads would give it."""
    return float(v) if isinstance(v, decimal.Decimal) else v


def judge(sql, duck_rows, ring_rows):
    """(verdict, detail): verdict is 'equal' or 'differs' (check.compare's rules)."""
    problem = check.compare(sql, duck_rows, [[plain(v) for v in row] for row in ring_rows])
    return ("equal", None) if problem is None else ("differs", problem)


# ---------------------------------------------------------------------------- report


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
    nproc = run_text(["nproc"])
    return {"nproc": int(nproc) if nproc.isdigit() else os.cpu_count(), "cpu_model": model,
            "memory_bytes": mem, "os": platform.platform()}


def versions(args, generator):
    import pyarrow

    commit = run_text(["git", "-C", REPO, "rev-parse", "--short", "HEAD"])
    if commit and run_text(["git", "-C", REPO, "status", "--porcelain", "--untracked-files=no"]):
        commit += "+dirty"
    v = {"duckdb": duckdb.__version__, "pyarrow": pyarrow.__version__, "tpchgen-cli": generator,
         "python": platform.python_version(), "ringscan_commit": commit or None}
    if args.ringscan:
        v["ringscan"] = run_text([args.ringscan, "--version"]) or None
    return v


def median(samples):
    return statistics.median(samples) if samples else None


def fmt_ms(ms):
    if ms is None:
        return "-"
    return f"{ms:.0f}" if ms >= 100 else f"{ms:.1f}" if ms >= 10 else f"{ms:.2f}"


def md_cell(text):
    return str(text).replace("|", "\\|").replace("\n", " ")


def markdown(report):
    m = report["machine"]
    v = report["versions"]
    mem = f", {m['memory_bytes'] / 2**30:.1f} GiB" if m.get("memory_bytes") else ""
    data = report["data"]
    ring = f"`{report['ringscan']}`" if report.get("ringscan") else "not run"
    details = [x for x in (v.get("ringscan"), v.get("ringscan_commit") and f"commit {v['ringscan_commit']}") if x]
    if report.get("ringscan") and details:
        ring += f" ({', '.join(details)})"
    lines = [
        f"### TPC-H SF {report['sf']}: ringscan and DuckDB",
        "",
        f"- date: {report['date']}",
        f"- machine: {m['nproc']} cores (nproc), {m.get('cpu_model')}{mem}; {m.get('os')}",
        f"- command: `{report['command']}`",
        f"- ringscan: {ring}",
        f"- versions: duckdb {v['duckdb']} (threads {report['threads']}), pyarrow {v['pyarrow']}, "
        f"tpchgen-cli {v['tpchgen-cli']}, Python {v['python']}",
        f"- data: `tpchgen-cli parquet -s {report['sf']}` ({report['parts']} file(s) per table; "
        f"{data['files']} files, {data['bytes'] / 2**20:.1f} MiB) in `{report['data_dir']}`",
    ]
    if report["check_only"]:
        lines += ["- answers only (`--check-only`): one run per query and engine, no timing", ""]
        lines += ["| query | DuckDB rows | ringscan rows | answer |", "| --- | --: | --: | --- |"]
        for q in report["queries"]:
            lines.append(f"| {q['name']} | {q['duckdb'].get('rows', '-')} | {q['ringscan'].get('rows', '-')} | "
                         f"{md_cell(answer_text(q))} |")
    else:
        lines += [
            f"- timing: per query and engine {report['warmup']} untimed + {report['repeat']} timed runs, median; "
            "DuckDB in one process (result fetched as Arrow), ringscan "
            f"`query --no-cache --warmup {report['warmup']} --repeat {report['repeat']} --stats-json` "
            "(its in-engine latency samples)",
            "",
            "| query | ringscan ms | DuckDB ms | ringscan / DuckDB | answer |",
            "| --- | --: | --: | --: | --- |",
        ]
        for q in report["queries"]:
            ratio = f"{q['ratio']:.2f}" if q.get("ratio") is not None else "-"
            lines.append(f"| {q['name']} | {fmt_ms(q['ringscan'].get('median_ms'))} | "
                         f"{fmt_ms(q['duckdb'].get('median_ms'))} | {ratio} | {md_cell(answer_text(q))} |")
        g = report.get("geomean_ratio")
        lines.append(f"| geometric mean ({report['timed_in_both']} queries) | | | "
                     f"{f'{g:.2f}' if g is not None else '-'} | |")
    s = report["summary"]
    lines += ["", f"{s['equal']} equal, {s['differs']} differ, {s['failed']} failed of {len(report['queries'])} queries.", ""]
    return "\n".join(lines)


def answer_text(q):
    if q["answer"] in ("equal", "not compared"):
        return q["answer"]
    return f"{q['answer']}: {q.get('detail')}"


# ---------------------------------------------------------------------------- main


def parse_queries(text):
    if text in ("", "all"):
        return list(range(1, 23))
    out = []
    for part in text.split(","):
        part = part.strip().lower().lstrip("q")
        if "-" in part:
            a, b = part.split("-", 1)
            out += list(range(int(a), int(b) + 1))
        elif part:
            out.append(int(part))
    for n in out:
        if not 1 <= n <= 22:
            sys.exit(f"tpch: no query {n} (1..22)")
    return out


def default_ringscan():
    for kind in ("release", "debug"):
        path = os.path.join(TARGET, kind, "ringscan")
        if os.path.exists(path):
            return path
    return None


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sf", type=float, default=1.0, help="scale factor [1]")
    p.add_argument("--data", help="data directory [<target>/tpch-sf<SF>]")
    p.add_argument("--ringscan", help="ringscan binary [<target>/release/ringscan, else <target>/debug/ringscan]")
    p.add_argument("--queries", default="all", help="e.g. 1,3,6 or 1-5 [all]")
    p.add_argument("--repeat", type=int, default=3, help="timed runs per query and engine [3]")
    p.add_argument("--warmup", type=int, default=1, help="untimed runs before them [1]")
    p.add_argument("--threads", type=int, default=2, help="DuckDB's SET threads [2]")
    p.add_argument("--check-only", action="store_true", help="compare answers only: one run each, no timing")
    p.add_argument("--duckdb-only", action="store_true", help="run DuckDB alone (no ringscan, nothing compared)")
    p.add_argument("--parts", type=int, default=1, help="Parquet files per table (tpchgen-cli --parts) [1]")
    p.add_argument("--timeout", type=int, default=1800, help="seconds per ringscan query run [1800]")
    p.add_argument("--out", help="output prefix [benches/results/tpch-sf<SF>; none with --check-only]")
    args = p.parse_args()
    args.command = "benches/tpch/run " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    if args.sf <= 0 or args.repeat < 1 or args.warmup < 0 or args.threads < 1 or args.parts < 1:
        sys.exit("tpch: --sf, --repeat, --threads and --parts must be positive, --warmup not negative")
    sf = sf_text(args.sf)
    args.data = os.path.abspath(args.data or os.path.join(TARGET, f"tpch-sf{sf}"))
    if args.out is None and not args.check_only:
        args.out = os.path.join(REPO, "benches", "results", f"tpch-sf{sf}")
    if args.duckdb_only:
        args.ringscan = None
    else:
        args.ringscan = args.ringscan or default_ringscan()
        if not args.ringscan or not os.path.exists(args.ringscan):
            sys.exit(f"tpch: no ringscan binary ({args.ringscan or TARGET + '/{release,debug}/ringscan'}); "
                     "build it, pass --ringscan BIN, or --duckdb-only")
        args.ringscan = os.path.abspath(args.ringscan)
    numbers = parse_queries(args.queries)

    generator = ensure_data(args)
    con = duck_connection(args.data, args.threads)
    results = []
    try:
        for n in numbers:
            results.append(run_query(args, con, n))
    finally:
        stop_daemon(args.ringscan, args.data)

    ratios = [q["ratio"] for q in results if q.get("ratio")]
    summary = {
        "equal": sum(q["answer"].startswith("equal") for q in results),
        "differs": sum(q["answer"] == "differs" for q in results),
        "failed": sum(q["answer"].endswith("failed") for q in results),
    }
    report = {
        "benchmark": "tpch",
        "sf": sf,
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "command": args.command,
        "machine": machine(),
        "versions": versions(args, generator["generator"].split()[-1]),
        "data_dir": args.data,
        "data": data_summary(args.data),
        "parts": args.parts,
        "ringscan": args.ringscan,
        "threads": args.threads,
        "repeat": None if args.check_only else args.repeat,
        "warmup": None if args.check_only else args.warmup,
        "check_only": args.check_only,
        "queries": results,
        "timed_in_both": len(ratios),
        "geomean_ratio": math.exp(sum(math.log(r) for r in ratios) / len(ratios)) if ratios else None,
        "summary": summary,
    }
    md = markdown(report)
    if args.out:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)) or ".", exist_ok=True)
        with open(args.out + ".json", "w") as f:
            json.dump(report, f, indent=2, default=str)
            f.write("\n")
        with open(args.out + ".md", "w") as f:
            f.write(md)
        log(f"wrote {args.out}.json and {args.out}.md")
    print(md)
    if report["geomean_ratio"] is not None:
        log(f"geometric mean ringscan/DuckDB over {len(ratios)} queries: {report['geomean_ratio']:.2f}")
    log(f"{summary['equal']} equal, {summary['differs']} differ, {summary['failed']} failed")
    bad = summary["differs"] + summary["failed"]
    sys.exit(1 if bad else 0)


def run_query(args, con, n):
    name = f"Q{n}"
    sql = query_sql(n)
    q = {"name": name, "file": f"queries/q{n:02d}.sql", "duckdb": {}, "ringscan": {},
         "answer": "not compared", "detail": None, "ratio": None}
    log(f"{name}: duckdb")
    duck_rows = None
    try:
        t0 = time.perf_counter()
        duck_rows = duck_answer(con, sql)
        q["duckdb"]["answer_ms"] = (time.perf_counter() - t0) * 1000
        q["duckdb"]["rows"] = len(duck_rows)
        if not args.check_only:
            samples = duck_time(con, sql, args.warmup, args.repeat)
            q["duckdb"].update(samples_ms=samples, median_ms=median(samples))
    except duckdb.Error as e:
        q["duckdb"]["error"] = short(str(e))
        q["answer"], q["detail"] = "duckdb failed", q["duckdb"]["error"]
    if args.ringscan:
        log(f"{name}: ringscan")
        t0 = time.perf_counter()
        ring_rows, err = ring_answer(args, sql)
        q["ringscan"]["answer_wall_ms"] = (time.perf_counter() - t0) * 1000
        if err:
            q["ringscan"]["error"] = err
            q["answer"], q["detail"] = "ringscan failed", err
        else:
            q["ringscan"]["rows"] = len(ring_rows)
            if duck_rows is not None:
                q["answer"], q["detail"] = judge(sql, duck_rows, ring_rows)
            if not args.check_only:
                samples, stats, terr = ring_time(args, sql)
                if terr:
                    q["ringscan"]["error"] = terr
                    q["answer"], q["detail"] = "ringscan failed", f"timed run: {terr}"
                else:
                    q["ringscan"].update(samples_ms=samples, median_ms=median(samples),
                                         peak_rss_bytes=(stats.get("counters") or {}).get("executor_peak_rss_bytes"))
    d_ms, r_ms = q["duckdb"].get("median_ms"), q["ringscan"].get("median_ms")
    if d_ms and r_ms:
        q["ratio"] = r_ms / d_ms
    parts = [f"{name}:"]
    if "rows" in q["duckdb"]:
        parts.append(f"duckdb {q['duckdb']['rows']} rows" + (f" {fmt_ms(d_ms)} ms" if d_ms is not None else ""))
    if "rows" in q["ringscan"]:
        parts.append(f"ringscan {q['ringscan']['rows']} rows" + (f" {fmt_ms(r_ms)} ms" if r_ms is not None else ""))
    if q["ratio"] is not None:
        parts.append(f"x{q['ratio']:.2f}")
    parts.append("-> " + answer_text(q))
    log(" ".join(parts))
    return q


if __name__ == "__main__":
    main()
