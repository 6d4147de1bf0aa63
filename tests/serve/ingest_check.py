"""psycopg 3 writing through `ringscan serve`: CREATE TABLE, INSERT with parameters of
every kind psycopg sends (prepared after 5 executions), rows read back equal to what
was written, errors by SQLSTATE (duplicate key 23505, NULL in NOT NULL 23502, no table
42P01, table exists 42P07), CHECKPOINT, then DuckDB reading the table's Parquet files
and finding the same rows; TRUNCATE and DROP TABLE.

Usage: ingest_check.py PORT DATA_DIR
Prints one line per check; exits non-zero (with the reason) at the first failure.
"""
import datetime
import decimal
import glob
import sys

import duckdb
import psycopg
from psycopg import errors

port, data = sys.argv[1], sys.argv[2]
dsn = f"host=127.0.0.1 port={port} user=ringscan dbname=ringscan connect_timeout=10"

UTC = datetime.timezone.utc


def row(i):
    return (
        i,
        f"sym{i % 7}",
        None if i % 5 == 0 else i * 1.25,
        i % 1000,
        datetime.datetime(2024, 1, 2, 9, 30) + datetime.timedelta(seconds=i, microseconds=i),
        datetime.datetime(2024, 1, 2, 14, 30, tzinfo=UTC) + datetime.timedelta(minutes=i),
        decimal.Decimal(i) / 4,
        i % 2 == 0,
        datetime.date(2024, 1, 1) + datetime.timedelta(days=i % 300),
        bytes([i % 256, 0, 255]),
    )


def expect_error(conn, sql, params, kind, label):
    try:
        conn.execute(sql, params)
    except kind as e:
        print(f"ok {label}: {type(e).__name__} ({e.sqlstate}): {str(e).strip()}")
        return
    raise AssertionError(f"{label}: no {kind.__name__}")


with psycopg.connect(dsn, autocommit=True) as conn:
    conn.execute(
        "CREATE TABLE ticks (id BIGINT PRIMARY KEY, sym TEXT NOT NULL, px DOUBLE PRECISION, "
        "qty INTEGER, ts TIMESTAMP, tz TIMESTAMPTZ, amount NUMERIC(12, 2), ok BOOLEAN, "
        "d DATE, raw BYTEA)"
    )
    print("ok create table")
    expect_error(conn, "CREATE TABLE ticks (a INT)", None, errors.DuplicateTable, "table exists")
    expect_error(conn, "INSERT INTO nope VALUES (1)", None, errors.UndefinedTable, "no table")

    sql = "INSERT INTO ticks VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
    written = [row(i) for i in range(1, 201)]
    with conn.cursor() as cur:
        # One statement per row: psycopg prepares it server-side after 5 executions.
        for r in written[:100]:
            cur.execute(sql, r)
            assert cur.rowcount == 1, f"rowcount {cur.rowcount}"
        cur.executemany(sql, written[100:])
    print(f"ok {len(written)} rows inserted one statement each")
    # Several rows in one statement, in binary.
    with conn.cursor(binary=True) as cur:
        cur.execute(
            "INSERT INTO ticks (id, sym, qty) VALUES (%s, %s, %s), (%s, %s, %s)",
            (1001, "x", 1, 1002, "y", 2),
        )
        assert cur.rowcount == 2, f"rowcount {cur.rowcount}"
    written += [(1001, "x", None, 1, None, None, None, None, None, None),
                (1002, "y", None, 2, None, None, None, None, None, None)]
    print("ok a statement of several rows, columns named, in binary")

    expect_error(conn, sql, row(7), errors.UniqueViolation, "duplicate key")
    expect_error(
        conn, "INSERT INTO ticks (id, sym) VALUES (%s, %s), (%s, %s)", (3000, "a", 3000, "b"),
        errors.UniqueViolation, "duplicate key within one statement",
    )
    expect_error(
        conn, "INSERT INTO ticks (id, sym) VALUES (%s, %s)", (3001, None),
        errors.NotNullViolation, "NULL in a NOT NULL column",
    )
    n = conn.execute("SELECT count(*) FROM ticks WHERE id >= 3000").fetchone()[0]
    assert n == 0, f"a refused statement left {n} rows"
    print("ok refused statements applied nothing")

    def read_back(label):
        for binary in (False, True):
            with conn.cursor(binary=binary) as cur:
                got = cur.execute("SELECT * FROM ticks ORDER BY id").fetchall()
            assert len(got) == len(written), f"{label}: {len(got)} rows, wrote {len(written)}"
            for g, w in zip(got, written):
                g = tuple(g)
                # TIMESTAMPTZ comes back in the session zone; compare instants.
                assert g[:5] == w[:5] and g[6:] == tuple(w[6:]) and g[5] == w[5], (
                    f"{label} ({'binary' if binary else 'text'}): {g} != {w}"
                )
        print(f"ok {label}: {len(written)} rows read back equal, text and binary")

    read_back("before the checkpoint")
    # A point lookup by the key, prepared.
    with conn.cursor() as cur:
        for i in (3, 150, 1002):
            for _ in range(6):
                got = cur.execute("SELECT id, sym FROM ticks WHERE id = %s", (i,)).fetchall()
            assert got == [(i, next(w[1] for w in written if w[0] == i))], got
    print("ok point lookups by the key")

    conn.execute("CHECKPOINT")
    read_back("after the checkpoint")
    files = glob.glob(f"{data}/ticks/*.parquet")
    assert files, "no Parquet file after CHECKPOINT"
    duck = duckdb.connect()
    duck.execute("SET TimeZone = 'UTC'")
    got = duck.execute(
        f"SELECT id, sym, px, qty, ts, amount, ok, d, raw FROM read_parquet({files!r}) ORDER BY id"
    ).fetchall()
    want = [(w[0], w[1], w[2], w[3], w[4], w[6], w[7], w[8], w[9]) for w in written]
    assert len(got) == len(want), f"DuckDB read {len(got)} rows, wrote {len(want)}"
    for g, w in zip(got, want):
        assert tuple(g) == w, f"DuckDB: {g} != {w}"
    print(f"ok DuckDB reads the {len(files)} flushed file(s): {len(got)} rows equal")

    conn.execute("INSERT INTO ticks (id, sym) VALUES (5000, 'late')")
    conn.execute("TRUNCATE ticks")
    n = conn.execute("SELECT count(*) FROM ticks").fetchone()[0]
    assert n == 0, f"{n} rows after TRUNCATE"
    conn.execute("INSERT INTO ticks (id, sym) VALUES (7, 'again')")
    got = conn.execute("SELECT id, sym FROM ticks").fetchall()
    assert got == [(7, "again")], got
    print("ok truncate, and a key free again after it")
    conn.execute("DROP TABLE ticks")
    expect_error(conn, "SELECT * FROM ticks", None, errors.UndefinedTable, "dropped")
    conn.execute("DROP TABLE IF EXISTS ticks")
    print("ok drop table")
