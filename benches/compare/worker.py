"""One engine of the compare script, in its own process (so its peak RSS is its own).

    python worker.py duckdb|polars SPEC.json

Serves the line protocol of ringscan_benches::side on stdin/stdout:
`prepare|run|cold <scenario>`, `rss`, `quit`; replies `ok ...` or `error <text>`.
`run` is timed here, around executing the SQL and materializing the whole result
(DuckDB: an Arrow table; Polars: a DataFrame from a lazy scan_parquet).
"""

import json
import os
import sys
import time


def table_glob(data_dir, table):
    return os.path.join(data_dir, table, "**", "*.parquet")


class DuckDB:
    def __init__(self, spec):
        import duckdb

        self.duckdb = duckdb
        self.spec = spec
        self.con = None
        self.connect()

    def connect(self):
        if self.con is not None:
            self.con.close()
        self.con = self.duckdb.connect()
        tables = {s["shape"]["table"] for s in self.spec["scenarios"]}
        for t in sorted(tables):
            path = table_glob(self.spec["data_dir"], t).replace("'", "''")
            self.con.execute(f"CREATE VIEW {t} AS SELECT * FROM read_parquet('{path}')")

    def run(self, sql):
        # The relation API materializes straight into Arrow (the DB-API result path
        # makes an extra copy of the rows in DuckDB 2.0).
        relation = self.con.sql(sql)
        for name in ("to_arrow_table", "fetch_arrow_table", "arrow"):
            fetch = getattr(relation, name, None)
            if fetch is not None:
                return fetch().num_rows
        raise RuntimeError("this duckdb has no Arrow fetch")

    def cold(self):
        # A fresh in-memory database: no cached Parquet metadata, no warm plans.
        self.connect()


class Polars:
    def __init__(self, spec):
        import polars as pl

        self.pl = pl
        self.spec = spec
        self.connect()

    def connect(self):
        self.ctx = self.pl.SQLContext()
        tables = {s["shape"]["table"] for s in self.spec["scenarios"]}
        for t in sorted(tables):
            self.ctx.register(t, self.pl.scan_parquet(table_glob(self.spec["data_dir"], t)))

    def run(self, sql):
        return self.ctx.execute(sql, eager=False).collect().height

    def cold(self):
        self.connect()


def peak_rss():
    fields = {}
    with open("/proc/self/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmHWM", "VmRSS"):
                fields[key] = int(value.split()[0]) * 1024
    return fields["VmHWM"], fields["VmRSS"]


def main():
    engine_name, spec_path = sys.argv[1], sys.argv[2]
    with open(spec_path) as f:
        spec = json.load(f)
    sql = {s["name"]: s["sql"] for s in spec["scenarios"]}
    engine = {"duckdb": DuckDB, "polars": Polars}[engine_name](spec)
    out = sys.stdout
    for line in sys.stdin:
        verb, _, arg = line.strip().partition(" ")
        try:
            if verb == "quit":
                break
            if verb == "rss":
                reply = "ok %d %d" % peak_rss()
            elif verb in ("prepare", "run", "cold") and arg not in sql:
                reply = f"error unknown scenario {arg!r}"
            elif verb == "prepare":
                reply = "ok"
            elif verb == "cold":
                engine.cold()
                reply = "ok"
            elif verb == "run":
                started = time.perf_counter()
                rows = engine.run(sql[arg])
                micros = (time.perf_counter() - started) * 1e6
                reply = f"ok {micros:.1f} {rows} -"
            else:
                reply = f"error unknown request {verb!r}"
        except Exception as e:  # reported to the harness, which shows it per scenario
            reply = "error " + " ".join(f"{type(e).__name__}: {e}".split())
        out.write(reply + "\n")
        out.flush()


if __name__ == "__main__":
    main()
