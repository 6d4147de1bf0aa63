"""Runs every query of a corpus through ringscan and DuckDB and compares the results.

Usage: check.py RINGSCAN_BIN DATA_DIR CORPUS_SQL
Prints one line per mismatch and a JSON summary last; exits 1 when any query differs or
fails in exactly one engine.

Comparison: row count and column count must match; values by position. Rows are compared
in order when the query has an ORDER BY (the corpus makes its sort keys unique), else as
sorted multisets. Floats match within a relative 1e-9 (NaN equals NaN); DuckDB's
HUGEINT/DECIMAL results compare numerically; timestamps and dates compare as values
whatever their printed form.
"""
import datetime as dt
import decimal
import json
import math
import os
import re
import subprocess
import sys

import duckdb

REL_TOL = 1e-9


def statements(path):
    text = "\n".join(
        line for line in open(path, encoding="utf-8") if not line.lstrip().startswith("--")
    )
    return [s.strip() for s in text.split(";") if s.strip()]


# Tables DuckDB answers from memory, not from the file: DuckDB 2.0's Parquet scan prunes
# row groups by min/max statistics that leave NaN out, so `x > 1` loses the NaN rows of
# a row group whose numbers are all below 1 (NaN is above every number in DuckDB's own
# order). Loaded into a table first, its answers are its semantics.
IN_MEMORY = {"floats_t"}


def duck_connection(data_dir):
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    for name in sorted(os.listdir(data_dir)):
        table = os.path.join(data_dir, name)
        if name.startswith(".") or not os.path.isdir(table):
            continue
        kind = "TABLE" if name in IN_MEMORY else "VIEW"
        con.execute(
            f"CREATE {kind} \"{name}\" AS SELECT * FROM read_parquet('{table}/**/*.parquet', "
            "hive_partitioning = true)"
        )
    return con


def parse_time(text):
    text = text.strip()
    for suffix in ("+00:00", "+00", "Z"):
        if text.endswith(suffix):
            text = text[: -len(suffix)]
            break
    return dt.datetime.fromisoformat(text.replace("T", " "))


def canon(duck_value, ring_value):
    """Both values in one comparable form, guided by DuckDB's Python type."""
    d, r = duck_value, ring_value
    if isinstance(d, dt.datetime):
        if d.tzinfo is not None:
            d = d.astimezone(dt.timezone.utc).replace(tzinfo=None)
        if isinstance(r, str):
            r = parse_time(r)
        return d, r
    if isinstance(d, dt.date):
        return d.isoformat(), r
    if isinstance(d, decimal.Decimal):
        d = int(d) if d == d.to_integral_value() else float(d)
    if isinstance(r, str) and isinstance(d, float) and r.lower() in ("nan", "inf", "-inf", "infinity", "-infinity"):
        r = float(r.replace("inity", ""))
    return d, r


def values_equal(d, r):
    if d is None or r is None:
        return d is None and r is None
    if isinstance(d, bool) or isinstance(r, bool):
        return d == r
    if isinstance(d, (int, float)) and isinstance(r, (int, float)):
        if isinstance(d, float) or isinstance(r, float):
            if math.isnan(d) or math.isnan(r):
                return math.isnan(d) and math.isnan(r)
            return math.isclose(d, r, rel_tol=REL_TOL, abs_tol=1e-12)
        return d == r
    return d == r


def sort_key(row):
    def k(v):
        if v is None:
            return (0, "")
        if isinstance(v, float):
            return (1, "nan" if math.isnan(v) else f"{v:.9g}")
        if isinstance(v, (int, decimal.Decimal)):
            return (1, f"{float(v):.9g}")
        return (2, str(v))

    return tuple(k(v) for v in row)


def run_ringscan(binary, data_dir, sql):
    argv = [binary, "query", "--data", data_dir, "--format", "json"]
    proc = subprocess.run(
        argv + [sql],
        capture_output=True,
        text=True,
        timeout=300,
    )
    if proc.returncode != 0:
        return None, proc.stderr.strip() or f"exit {proc.returncode}"
    rows = [list(json.loads(line).values()) for line in proc.stdout.splitlines() if line.strip()]
    return rows, None


def compare(sql, duck_rows, ring_rows):
    if len(duck_rows) != len(ring_rows):
        return f"row count: duckdb {len(duck_rows)}, ringscan {len(ring_rows)}"
    ordered = re.search(r"\border\s+by\b", sql, re.IGNORECASE) is not None
    pairs = []
    for d_row, r_row in zip(duck_rows, ring_rows):
        if len(d_row) != len(r_row):
            return f"column count: duckdb {len(d_row)}, ringscan {len(r_row)}"
        pairs.append([canon(d, r) for d, r in zip(d_row, r_row)])
    if not ordered:
        # Canonicalise each side with the other's types only where the first rows agree
        # in shape; then sort both.
        duck_c = sorted(([p[0] for p in row] for row in pairs), key=sort_key)
        ring_c = sorted(([p[1] for p in row] for row in pairs), key=sort_key)
        # Re-run canon on the sorted pairs: types are per column, so pairing is safe.
        d_rows = duck_c
        r_rows = ring_c
    else:
        d_rows = [[p[0] for p in row] for row in pairs]
        r_rows = [[p[1] for p in row] for row in pairs]
    for i, (d_row, r_row) in enumerate(zip(d_rows, r_rows)):
        for j, (d, r) in enumerate(zip(d_row, r_row)):
            if not values_equal(d, r):
                return f"row {i} column {j}: duckdb {d!r}, ringscan {r!r}"
    return None


def main():
    binary, data_dir, corpus = sys.argv[1], sys.argv[2], sys.argv[3]
    con = duck_connection(data_dir)
    failures = []
    queries = statements(corpus)
    for sql in queries:
        try:
            duck_rows = [list(r) for r in con.execute(sql).fetchall()]
            duck_error = None
        except duckdb.Error as e:
            duck_rows, duck_error = None, str(e)
        ring_rows, ring_error = run_ringscan(binary, data_dir, sql)
        if duck_error and ring_error:
            problem = None  # both refuse: fine, though the corpus should not hold these
        elif duck_error:
            problem = f"duckdb failed ({duck_error}), ringscan answered"
        elif ring_error:
            problem = f"ringscan failed: {ring_error}"
        else:
            problem = compare(sql, duck_rows, ring_rows)
        if problem:
            failures.append({"sql": sql, "problem": problem})
            print(f"MISMATCH {sql}\n    {problem}", flush=True)
    print(json.dumps({"queries": len(queries), "failures": len(failures)}))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
