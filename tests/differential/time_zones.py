"""Time zones against DuckDB: TIMESTAMPTZ columns across daylight-saving changes, read,
truncated, split and printed in a session zone, on the same Parquet file.

Usage: time_zones.py RINGSCAN_BIN DATA_DIR
Writes DATA_DIR/tz_events/part-0.parquet (pyarrow: instants every 30 minutes over the
spring and autumn changes of 2024 in Europe and the US, stored in zones UTC, +02:00 and
America/New_York, in micro- and milliseconds, with NULLs; small row groups so that
predicates prune), then for each session zone runs every query through `ringscan query
--time-zone ZONE --format csv` and through DuckDB after `SET TimeZone = 'ZONE'`, and
compares the printed text: DuckDB's values cast to VARCHAR, ringscan's CSV cells.
Prints one line per mismatch and a JSON summary last; exits 1 on any mismatch.
"""
import csv
import datetime as dt
import io
import json
import os
import subprocess
import sys

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

ZONES = ["UTC", "Europe/Berlin", "America/New_York", "Asia/Kolkata"]

# One wide query per zone (one ringscan process each): printing, truncation, parts and
# casts of every stored zone and unit.
PER_ROW = """
SELECT id, ts_utc, ts_off, ts_ny, ts_ms, ts_naive::TIMESTAMPTZ AS naive_tz,
       date_trunc('day', ts_utc) AS d_utc, date_trunc('day', ts_off) AS d_off,
       date_trunc('day', ts_ny) AS d_ny, date_trunc('day', ts_ms) AS d_ms,
       date_trunc('month', ts_utc) AS m_utc,
       date_part('hour', ts_utc) AS hour_utc, extract(hour FROM ts_off) AS hour_off,
       date_part('day', ts_ny) AS day_ny, extract(month FROM ts_utc) AS month_utc,
       date_part('year', ts_utc) AS year_utc, extract(minute FROM ts_ms) AS minute_ms,
       ts_utc::DATE AS date_utc, CAST(ts_ny AS DATE) AS date_ny,
       ts_utc::TIMESTAMP AS local_utc
FROM tz_events ORDER BY id
"""

QUERIES = [
    PER_ROW,
    # Hours, except in the hour that happens twice (02:00-02:59 in Berlin on
    # 2024-10-27, 01:00-01:59 in New York on 2024-11-03): there DuckDB truncates the
    # first 02:45+02 to the second 02:00+01, an instant after the value; ringscan keeps
    # the value's offset, 02:00+02 (KNOWN_DIFFERENCES.md).
    "SELECT id, date_trunc('hour', ts_ny) AS h FROM tz_events "
    "WHERE NOT (ts_utc >= TIMESTAMPTZ '2024-10-27 00:00:00+00' AND ts_utc < TIMESTAMPTZ '2024-10-27 01:00:00+00') "
    "AND NOT (ts_utc >= TIMESTAMPTZ '2024-11-03 05:00:00+00' AND ts_utc < TIMESTAMPTZ '2024-11-03 06:00:00+00') "
    "ORDER BY id",
    # Local times that happen twice or never, made instants (DuckDB: the later one; the
    # offset before the change).
    "SELECT TIMESTAMPTZ '2024-03-31 02:30:00' AS a, TIMESTAMPTZ '2024-10-27 02:30:00' AS b, "
    "TIMESTAMPTZ '2024-03-10 02:30:00' AS c, TIMESTAMPTZ '2024-11-03 01:30:00' AS d",
    # Days of 23 and 25 hours: rows per local day (every 30 minutes: 46, 48 or 50).
    "SELECT date_trunc('day', ts_utc) AS d, count(*) AS n FROM tz_events "
    "GROUP BY d ORDER BY d",
    "SELECT ts_off::DATE AS d, count(*) AS n, min(ts_ny) AS first FROM tz_events "
    "GROUP BY d ORDER BY d",
    "SELECT date_trunc('month', ts_ny) AS m, count(ts_ny) AS n, max(ts_ms) AS last "
    "FROM tz_events GROUP BY m ORDER BY m",
    "SELECT date_trunc('hour', ts_utc) AS h, count(*) AS n FROM tz_events "
    "WHERE ts_utc BETWEEN TIMESTAMPTZ '2024-03-31 00:00:00+01' "
    "AND TIMESTAMPTZ '2024-03-31 05:00:00+02' GROUP BY h ORDER BY h",
    # Literals with offsets and without (those are local time in the session zone),
    # against every stored zone: what the daemon prunes and filters with.
    "SELECT count(*) AS n FROM tz_events WHERE ts_utc >= TIMESTAMPTZ '2024-03-31 00:00:00+05:30'",
    "SELECT count(*) AS n FROM tz_events WHERE ts_off < TIMESTAMPTZ '2024-03-10 02:30:00-05'",
    "SELECT count(*) AS n FROM tz_events WHERE ts_ny = TIMESTAMPTZ '2024-10-27 02:30:00+01'",
    "SELECT count(*) AS n FROM tz_events WHERE ts_ms > TIMESTAMPTZ '2024-11-03 01:30:00-04'",
    "SELECT count(*) AS n FROM tz_events WHERE ts_utc >= TIMESTAMPTZ '2024-03-31 00:00:00'",
    "SELECT count(*) AS n FROM tz_events WHERE ts_ny < '2024-03-10 03:00:00'",
    "SELECT count(*) AS n FROM tz_events WHERE ts_utc >= TIMESTAMP '2024-10-27 02:30:00'",
    "SELECT min(id) AS lo, max(id) AS hi FROM tz_events "
    "WHERE ts_off BETWEEN TIMESTAMPTZ '2024-10-26 22:00:00-02' AND TIMESTAMPTZ '2024-10-27 03:00:00+00'",
    "SELECT id, ts_utc FROM tz_events WHERE ts_utc IN "
    "(TIMESTAMPTZ '2024-03-31 03:30:00+02', TIMESTAMPTZ '2024-03-10 03:00:00-04') ORDER BY id",
    "SELECT TIMESTAMPTZ '2024-01-01 00:00:00+05:30' AS a, TIMESTAMPTZ '2024-07-01 12:00:00' AS b, "
    "DATE '2024-03-31'::TIMESTAMPTZ AS c",
]


def write_data(data_dir):
    table_dir = os.path.join(data_dir, "tz_events")
    os.makedirs(table_dir, exist_ok=True)
    step = 30 * 60 * 1_000_000
    instants = []
    for start, end in [((2024, 3, 8), (2024, 4, 2)), ((2024, 10, 25), (2024, 11, 5))]:
        t = int(dt.datetime(*start, tzinfo=dt.timezone.utc).timestamp()) * 1_000_000
        stop = int(dt.datetime(*end, tzinfo=dt.timezone.utc).timestamp()) * 1_000_000
        while t < stop:
            instants.append(t)
            t += step
    ids = list(range(len(instants)))
    with_nulls = [None if i % 97 == 5 else t for i, t in zip(ids, instants)]
    table = pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "ts_utc": pa.array(instants, pa.timestamp("us", tz="UTC")),
            "ts_off": pa.array(instants, pa.timestamp("us", tz="+02:00")),
            "ts_ny": pa.array(with_nulls, pa.timestamp("us", tz="America/New_York")),
            "ts_ms": pa.array(
                [None if t is None else t // 1000 for t in with_nulls],
                pa.timestamp("ms", tz="UTC"),
            ),
            "ts_naive": pa.array(instants, pa.timestamp("us")),
        }
    )
    pq.write_table(table, os.path.join(table_dir, "part-0.parquet"), row_group_size=256)
    return table_dir


def duck_rows(con, sql):
    cur = con.execute(sql)
    names = [d[0] for d in cur.description]
    rows = cur.fetchall()
    # The text DuckDB prints: each value cast to VARCHAR by DuckDB itself.
    rel = con.execute(
        "SELECT " + ", ".join(f'CAST("{n}" AS VARCHAR)' for n in names) + f" FROM ({sql})"
    ).fetchall()
    assert len(rel) == len(rows)
    return [["" if v is None else v for v in row] for row in rel]


def ring_rows(binary, data_dir, zone, sql):
    proc = subprocess.run(
        [binary, "query", "--data", data_dir, "--format", "csv", "--time-zone", zone, sql],
        capture_output=True,
        text=True,
        timeout=120,
    )
    if proc.returncode != 0:
        return None, proc.stderr.strip() or f"exit {proc.returncode}"
    rows = list(csv.reader(io.StringIO(proc.stdout)))
    return rows[1:], None


def main():
    binary, data_dir = sys.argv[1], sys.argv[2]
    table_dir = write_data(data_dir)
    con = duckdb.connect()
    con.execute(
        f"CREATE VIEW tz_events AS SELECT * FROM read_parquet('{table_dir}/*.parquet')"
    )
    failures = 0
    compared = 0
    for zone in ZONES:
        con.execute(f"SET TimeZone = '{zone}'")
        for sql in QUERIES:
            compared += 1
            want = duck_rows(con, sql)
            got, error = ring_rows(binary, data_dir, zone, sql)
            problem = None
            if error:
                problem = f"ringscan failed: {error}"
            elif len(got) != len(want):
                problem = f"row count: duckdb {len(want)}, ringscan {len(got)}"
            else:
                for i, (w, g) in enumerate(zip(want, got)):
                    if w != g:
                        problem = f"row {i}: duckdb {w}, ringscan {g}"
                        break
            if problem:
                failures += 1
                print(f"MISMATCH [{zone}] {' '.join(sql.split())}\n    {problem}", flush=True)
    print(json.dumps({"queries": compared, "failures": failures}))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
