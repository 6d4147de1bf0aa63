"""Compare ringscan's rows with DuckDB's, file by file.

Usage: compare.py MANIFEST.json
The manifest lists {"name", "original", "ours"}: `ours` is a Parquet file holding the
rows ringscan returned for `original`. For each entry one JSON line is printed:
{"name", "duckdb_error"} when DuckDB cannot read the original, else
{"name", "duckdb_rows", "our_rows", "equal", "example"} with rows compared as a
multiset of canonical texts (column order kept, row order ignored).
"""

import datetime
import decimal
import json
import math
import sys

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq


def canon(v):
    if v is None:
        return None
    if isinstance(v, bool):
        return v
    if isinstance(v, int):
        return v
    if isinstance(v, float):
        if math.isnan(v):
            return "NaN"
        return repr(float(v))
    if isinstance(v, decimal.Decimal):
        return "dec:" + format(v.normalize(), "f") if v == v else "dec:NaN"
    if isinstance(v, (bytes, bytearray, memoryview)):
        return "bin:" + bytes(v).hex()
    if isinstance(v, str):
        return v
    if isinstance(v, datetime.datetime):
        if v.tzinfo is not None:
            v = v.astimezone(datetime.timezone.utc).replace(tzinfo=None)
        return "ts:" + v.isoformat()
    if isinstance(v, (datetime.date, datetime.time, datetime.timedelta)):
        return "t:" + str(v)
    if isinstance(v, dict):
        return {str(k): canon(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        # Maps come back from pyarrow as lists of (key, value) tuples.
        return [canon(x) for x in v]
    return "other:" + repr(v)


def flat_timestamps(table):
    """Timestamps as microseconds since the epoch (Python's datetime cannot hold every
    Parquet timestamp, and the two readers pick different units)."""
    cols = []
    for col in table.columns:
        if pa.types.is_timestamp(col.type):
            col = col.cast(pa.timestamp("us"), safe=False).cast(pa.int64())
        cols.append(col)
    return pa.table(cols, names=[f"c{i}" for i in range(len(cols))])


def rows(table):
    table = flat_timestamps(table)
    out = []
    for r in table.to_pylist():
        out.append(json.dumps([canon(x) for x in r.values()], sort_keys=True))
    out.sort()
    return out


def main():
    with open(sys.argv[1]) as f:
        manifest = json.load(f)
    con = duckdb.connect()
    for e in manifest:
        res = {"name": e["name"]}
        try:
            rel = con.read_parquet(e["original"])
            theirs = rel.to_arrow_table()
        except Exception as ex:  # noqa: BLE001 - any refusal is reported
            res["duckdb_error"] = str(ex).splitlines()[0][:300]
            print(json.dumps(res), flush=True)
            continue
        try:
            compare(e, theirs, res)
        except Exception as ex:  # noqa: BLE001 - reported as a failure
            res["compare_error"] = str(ex).splitlines()[0][:300]
        print(json.dumps(res), flush=True)


def compare(e, theirs, res):
    if True:
        a = rows(theirs)
        if e["ours"] is not None:
            try:
                b = rows(pq.read_table(e["ours"]))
            except Exception as ex:  # noqa: BLE001 - reported as a failure
                res["ours_error"] = str(ex).splitlines()[0][:300]
                return
        else:
            b = ["[]"] * e["our_count"] if theirs.num_columns == 0 else []
            if theirs.num_columns == 0:
                a = ["[]"] * theirs.num_rows
        res["duckdb_rows"] = len(a)
        res["our_rows"] = len(b)
        res["equal"] = a == b
        if a != b:
            sa, sb = set(a), set(b)
            only_a = sorted(sa - sb)[:1]
            only_b = sorted(sb - sa)[:1]
            res["example"] = {"duckdb_only": only_a, "ours_only": only_b}


main()
