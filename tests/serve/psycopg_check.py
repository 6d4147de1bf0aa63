"""psycopg 3 against `ringscan serve`: answers equal DuckDB's over the same files, in
text and binary, with parameters of every kind psycopg sends; session parameters;
statement_timeout and cancel; errors by SQLSTATE; max connections.

Usage: psycopg_check.py PORT OHLCV_GLOB MAX_CONNECTIONS
Prints one line per check; exits non-zero (with the reason) at the first failure.
"""
import datetime
import decimal
import math
import sys
import threading
import time

import duckdb
import psycopg
from psycopg import errors

port, glob, max_connections = sys.argv[1], sys.argv[2], int(sys.argv[3])
dsn = f"host=127.0.0.1 port={port} user=ringscan dbname=ringscan connect_timeout=10"

duck = duckdb.connect()
duck.execute("SET TimeZone = 'UTC'")
duck.execute(f"CREATE VIEW ohlcv AS SELECT * FROM read_parquet('{glob}', hive_partitioning = true)")


def same(a, b):
    if isinstance(a, float) or isinstance(b, float):
        return a is not None and b is not None and math.isclose(float(a), float(b), rel_tol=1e-12)
    return a == b


def check_rows(label, got, want):
    assert len(got) == len(want), f"{label}: {len(got)} rows, DuckDB {len(want)}"
    assert len(got) > 0, f"{label}: no rows to compare"
    for i, (g, w) in enumerate(zip(got, want)):
        assert len(g) == len(w), f"{label} row {i}: {g} vs DuckDB {w}"
        for c, (x, y) in enumerate(zip(g, w)):
            assert same(x, y), f"{label} row {i} column {c}: {x!r} vs DuckDB {y!r}"
    print(f"ok {label}: {len(got)} rows equal DuckDB's")


# Queries with parameters of the types psycopg sends: int (int2/int4/int8 by value, in
# binary), float (binary float8), str (text, type unspecified), datetime (binary
# timestamptz for an aware one), Decimal (numeric), bool.
day = datetime.datetime(2024, 1, 2, tzinfo=datetime.timezone.utc)
queries = [
    ("group by", "SELECT symbol, count(*) AS n, min(ts) AS first, max(close) AS top "
     "FROM ohlcv GROUP BY symbol ORDER BY symbol", ()),
    ("int and str", "SELECT symbol, ts, close, volume FROM ohlcv WHERE symbol = %s AND volume > %s "
     "ORDER BY ts LIMIT 20", ("AAPL", 1000)),
    ("big int", "SELECT count(*) FROM ohlcv WHERE volume < %s", (2**40,)),
    ("float", "SELECT symbol, ts, close FROM ohlcv WHERE close > %s ORDER BY close DESC, ts, symbol LIMIT 10",
     (400.5,)),
    ("timestamptz", "SELECT count(*), min(ts) FROM ohlcv WHERE ts >= %s", (day,)),
    ("decimal", "SELECT count(*) FROM ohlcv WHERE close < %s", (decimal.Decimal("150.25"),)),
    ("bool and null", "SELECT %s AS b, %s AS n, 1 + 1", (True, None)),
    # Every row: many packs of rows on their way out (the host hands a result the
    # client takes whole to pgwire 1,024 rows at a time), counted right in the tag.
    ("many rows", "SELECT symbol, ts, close, volume FROM ohlcv WHERE close > %s "
     "ORDER BY ts, symbol", (0.0,)),
]
duck_sql = lambda s: s.replace("%s", "?")



def check_query(cursor, label, sql, params):
    """Rows, row count and status of `sql` through `cursor` against DuckDB's."""
    with cursor as cur:
        cur.execute(sql, params)
        got = cur.fetchall()
        counted = (cur.rowcount, cur.statusmessage)
    want = duck.execute(duck_sql(sql), list(params)).fetchall()
    check_rows(label, got, want)
    assert counted == (len(want), f"SELECT {len(want)}"), f"{label}: {counted}"


with psycopg.connect(dsn, autocommit=True) as conn:
    for binary in (False, True):
        for label, sql, params in queries:
            kind = "binary" if binary else "text"
            check_query(conn.cursor(binary=binary), f"{label} ({kind})", sql, params)
    # The same over the simple protocol (literals in the text).
    label, sql, params = queries[-1]
    check_query(psycopg.ClientCursor(conn), f"{label} (simple protocol)", sql, params)

    # psycopg prepares a statement on the server after 5 executions; the 6th and later
    # run the named prepared statement.
    sql = "SELECT count(*) FROM ohlcv WHERE symbol = %s AND close > %s"
    for i in range(8):
        symbol, floor = ["AAPL", "MSFT"][i % 2], 100.0 + i
        got = conn.execute(sql, (symbol, floor)).fetchone()[0]
        want = duck.execute(duck_sql(sql), [symbol, floor]).fetchone()[0]
        assert got == want, f"execution {i}: {got} vs DuckDB {want}"
    print("ok a statement prepared by psycopg answers like the unprepared one")

    # COPY TO STDOUT in the binary format, read back by psycopg's binary loaders.
    sql = ("SELECT symbol, ts, open, close, volume FROM ohlcv WHERE symbol = 'MSFT' "
           "ORDER BY ts LIMIT 300")
    with conn.cursor() as cur:
        with cur.copy(f"COPY ({sql}) TO STDOUT (FORMAT BINARY)") as copy:
            copy.set_types(["text", "timestamptz", "float8", "float8", "numeric"])
            got = [tuple(row) for row in copy.rows()]
    check_rows("COPY TO STDOUT (FORMAT BINARY)", got, duck.execute(sql).fetchall())

    # Column names as PostgreSQL gives them.
    cur = conn.execute("SELECT count(*), 1, symbol FROM ohlcv GROUP BY symbol LIMIT 1")
    names = [d.name for d in cur.description]
    assert names == ["count", "?column?", "symbol"], names
    print("ok column names:", names)

    # Session parameters.
    conn.execute("SET TimeZone = 'Europe/Berlin'")
    assert conn.execute("SHOW TimeZone").fetchone()[0] == "Europe/Berlin"
    assert conn.info.parameter_status("TimeZone") in ("Europe/Berlin", "UTC", "Etc/UTC")
    conn.execute("SET application_name = 'check'")
    assert conn.execute("SHOW application_name").fetchone()[0] == "check"
    conn.execute("RESET ALL")
    assert conn.execute("SHOW application_name").fetchone()[0] != "check"
    try:
        conn.execute("SET no_such_parameter = 1")
        raise AssertionError("an unknown parameter was accepted")
    except errors.UndefinedObject:
        pass
    print("ok SET / SHOW / RESET")

    # Errors by SQLSTATE; the connection lives on.
    for sql, kind in [
        ("SELECT nope FROM ohlcv", errors.UndefinedColumn),
        ("SELECT * FROM no_such_table", errors.UndefinedTable),
        ("SELEKT 1", errors.SyntaxError),
    ]:
        try:
            conn.execute(sql)
            raise AssertionError(f"{sql} succeeded")
        except kind:
            pass
    assert conn.execute("SELECT 2 + 2").fetchone()[0] == 4
    print("ok errors carry their SQLSTATE")

    def stopped_by_timeout(sql, within):
        """Seconds `sql` ran under a statement_timeout of 300 ms (QueryCanceled)."""
        conn.execute("SET statement_timeout = '300ms'")
        started = time.monotonic()
        try:
            conn.execute(sql)
            raise AssertionError(f"{sql} finished within its timeout")
        except errors.QueryCanceled as e:
            assert "statement timeout" in str(e), str(e)
        took = time.monotonic() - started
        assert took < within, f"statement_timeout of 300 ms stopped {sql} after {took:.1f} s"
        conn.execute("SET statement_timeout = 0")
        return took

    def stopped_by_cancel(sql, within):
        """Seconds `sql` ran until a cancel request sent after 300 ms stopped it."""
        def cancel_soon():
            time.sleep(0.3)
            conn.cancel_safe()

        t = threading.Thread(target=cancel_soon)
        t.start()
        started = time.monotonic()
        try:
            conn.execute(sql)
            raise AssertionError(f"{sql} was not canceled")
        except errors.QueryCanceled:
            pass
        t.join()
        took = time.monotonic() - started
        assert took < within, f"cancel stopped {sql} after {took:.1f} s"
        return took

    # A query that runs for many seconds: every close against every other.
    slow = "SELECT count(*) FROM ohlcv a, ohlcv b WHERE a.close < b.close + a.volume * 0"
    took = stopped_by_timeout(slow, 5)
    print(f"ok statement_timeout stopped the query after {took:.2f} s")
    took = stopped_by_cancel(slow, 5)
    started = time.monotonic()
    assert conn.execute("SELECT count(*) FROM ohlcv").fetchone()[0] > 0
    after = time.monotonic() - started
    print(f"ok a cancel request stopped the query after {took:.2f} s; the next took {after:.3f} s")

    # A result read as it is sent (past what the host holds; the test's host holds
    # 64 KiB): 400 million rows, stopped by the statement timeout and by a cancel
    # request after some of them went out, the connection fine after.
    endless = "SELECT a.close, b.volume FROM ohlcv a, ohlcv b"
    took = stopped_by_timeout(endless, 10) + stopped_by_cancel(endless, 10)
    assert conn.execute("SELECT count(*) FROM ohlcv").fetchone()[0] == 20000
    print(f"ok a result being sent stops at its timeout and at a cancel ({took:.2f} s)")

# Transactions as psycopg opens them (autocommit off: BEGIN before the first statement).
with psycopg.connect(dsn) as conn:
    assert conn.execute("SELECT count(*) FROM ohlcv").fetchone()[0] > 0
    assert conn.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS
    conn.commit()
    assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
    print("ok transaction status follows BEGIN and COMMIT")

# Max connections: the one past the limit is refused with 53300, the others work.
# The host frees a closed connection's slot once it has seen it go, a moment after the
# client's close returns (as PostgreSQL's backends exit): wait for the earlier ones.
deadline = time.monotonic() + 10
while True:
    held = []
    try:
        for _ in range(max_connections):
            held.append(psycopg.connect(dsn, autocommit=True))
        break
    except psycopg.OperationalError as e:
        for c in held:
            c.close()
        if "too many clients" not in str(e) or time.monotonic() > deadline:
            raise
        time.sleep(0.05)
try:
    psycopg.connect(dsn)
    raise AssertionError(f"connection {max_connections + 1} was accepted")
except psycopg.OperationalError as e:
    assert "too many clients" in str(e), str(e)
for c in held:
    assert c.execute("SELECT 1").fetchone()[0] == 1
    c.close()
time.sleep(0.2)
with psycopg.connect(dsn) as conn:
    assert conn.execute("SELECT 1").fetchone()[0] == 1
print(f"ok connection {max_connections + 1} refused (too many clients), accepted once others closed")
