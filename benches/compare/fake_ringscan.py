#!/usr/bin/env python3
"""A stand-in for `ringscan query` with DuckDB underneath, to test the compare script's
ringscan path (stats JSON, row checks, ratios) before the real one lands:

    RINGSCAN_REAL=target/release/ringscan benches/compare/run --ringscan benches/compare/fake_ringscan.py \\
        --suites pushdown --rows 20000 --repeat 4 --cold-cmd true

Every other subcommand goes to the real binary. FAKE_WRONG=1 returns one row too many
(the mismatch check must shout). Its figures are DuckDB's, not ringscan's: never publish them.
"""
import json, os, sys, time
REAL = os.environ.get("RINGSCAN_REAL") or os.path.join(os.environ.get("RINGSCAN_TARGET", "target"), "release", "ringscan")
a = sys.argv[1:]
if not a or a[0] != "query":
    os.execv(REAL, [REAL] + a)
if "--help" in a:
    print("--data --format --stats --no-cache --repeat --stats-json"); sys.exit(0)
import duckdb
def opt(name, default=None):
    return a[a.index(name) + 1] if name in a else default
data, repeat, stats = opt("--data"), int(opt("--repeat", "1")), opt("--stats-json")
sql = a[-1]
con = duckdb.connect()
for t in os.listdir(data):
    if os.path.isdir(os.path.join(data, t)) and not t.startswith("."):
        con.execute(f"CREATE VIEW {t} AS SELECT * FROM read_parquet('{data}/{t}/**/*.parquet')")
lat = []
for _ in range(repeat):
    t0 = time.perf_counter(); rows = con.sql(sql).to_arrow_table().num_rows; lat.append((time.perf_counter() - t0) * 1e6)
s = sorted(lat)
json.dump({"latency_us": {"p50": s[len(s)//2], "p95": s[-1], "p99": s[-1], "mean": sum(s)/len(s)},
           "rows_returned": rows + (1 if "FAKE_WRONG" in os.environ else 0), "scan": {"bytes_read": 1234}, "cache": {"plan_hit": False, "result_hit": False},
           "counters": {"instructions": 1, "cycles": 2}}, open(stats, "w"))
