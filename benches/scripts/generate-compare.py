"""Checks that two `ringscan generate contacts` outputs hold the same rows and the same
statistics, read by pyarrow and by DuckDB (issue 21, item 1: the dictionary writer
against the ArrowWriter files of an earlier binary).

    target/tmp/interop-venv/bin/python benches/scripts/generate-compare.py DIR_A DIR_B

Both directories must come from the same options (rows, seed, writers, row groups).
Checks: pyarrow reads equal tables (row for row); every column chunk's statistics
(min, max, null count) and value count are equal in pyarrow's and DuckDB's reading of
the footers; DuckDB finds no row of one output missing from the other; filters on each
string leaf (which DuckDB and pyarrow prune by those statistics) count the same rows on
both sides and as an unprunable spelling of the same filter.
"""

import glob
import sys

import duckdb
import pyarrow.parquet as pq


def files(d):
    found = sorted(glob.glob(f"{d}/*.parquet"))
    assert found, f"no Parquet files in {d}"
    return found


def main():
    a, b = sys.argv[1:3]
    fa, fb = files(a), files(b)
    assert len(fa) == len(fb), (fa, fb)

    ta, tb = pq.read_table(fa), pq.read_table(fb)
    assert ta.num_rows == tb.num_rows and ta.num_rows > 0
    assert ta.equals(tb), "pyarrow: the rows differ"
    print(f"pyarrow: {ta.num_rows:,} rows equal, row for row")

    chunks = 0
    for x, y in zip(fa, fb):
        ma, mb = pq.ParquetFile(x).metadata, pq.ParquetFile(y).metadata
        assert ma.num_row_groups == mb.num_row_groups
        for rg in range(ma.num_row_groups):
            ra, rb = ma.row_group(rg), mb.row_group(rg)
            assert ra.num_rows == rb.num_rows
            for c in range(ra.num_columns):
                ca, cb = ra.column(c), rb.column(c)
                sa, sb = ca.statistics, cb.statistics
                where = f"{x} rg {rg} {ca.path_in_schema}"
                assert ca.num_values == cb.num_values, where
                assert sa.has_min_max == sb.has_min_max, where
                if sa.has_min_max:
                    assert (sa.min, sa.max) == (sb.min, sb.max), where
                assert sa.null_count == sb.null_count, where
                chunks += 1
    print(f"pyarrow: statistics of {chunks} column chunks equal")

    con = duckdb.connect()
    stats = """SELECT row_group_id, path_in_schema, num_values, stats_min_value,
                      stats_max_value, stats_null_count
               FROM parquet_metadata({files}) ORDER BY ALL"""
    sa = con.execute(stats.format(files=fa)).fetchall()
    sb = con.execute(stats.format(files=fb)).fetchall()
    assert len(sa) == len(sb) and all(r[1:] == s[1:] for r, s in zip(sa, sb)), "duckdb: statistics differ"
    print(f"duckdb: statistics of {len(sa)} column chunks equal")

    con.sql(f"CREATE VIEW a AS SELECT * FROM read_parquet({fa})")
    con.sql(f"CREATE VIEW b AS SELECT * FROM read_parquet({fb})")
    for left, right in [("a", "b"), ("b", "a")]:
        (n,) = con.execute(f"SELECT count(*) FROM (SELECT * FROM {left} EXCEPT ALL SELECT * FROM {right})").fetchone()
        assert n == 0, f"duckdb: {n} rows of {left} not in {right}"
    print("duckdb: EXCEPT ALL empty both ways")

    filters = [
        ("name = 'Mary Smith'", "name || '' = 'Mary Smith'"),
        ("name >= 'Y'", "substr(name, 1, 1) >= 'Y'"),
        ("address.city = 'Zurich'", "address.city || '' = 'Zurich'"),
        ("address.zip BETWEEN '42000' AND '42100'", "address.zip || '' BETWEEN '42000' AND '42100'"),
        ("name IS NULL", "coalesce(name, '') = ''"),
    ]
    for pruned, plain in filters:
        counts = [con.execute(f"SELECT count(*) FROM {t} WHERE {f}").fetchone()[0]
                  for t in ("a", "b") for f in (pruned, plain)]
        assert len(set(counts)) == 1, (pruned, counts)
        pa_rows = pq.read_table(fb, filters=pruned_filter(pruned)).num_rows if pruned_filter(pruned) else counts[0]
        assert pa_rows == counts[0], (pruned, pa_rows, counts)
        print(f"filter {pruned}: {counts[0]:,} rows on both sides, pruned or not")
    for leaf in ("number", "kind"):
        q = "SELECT p.{leaf}, count(*) FROM (SELECT unnest(phones) AS p FROM {t}) GROUP BY ALL ORDER BY ALL"
        ra = con.execute(q.format(leaf=leaf, t="a")).fetchall()
        rb = con.execute(q.format(leaf=leaf, t="b")).fetchall()
        assert ra == rb, leaf
        print(f"duckdb: phones.{leaf}: {len(ra):,} distinct values, counts equal")
    print("OK")


def pruned_filter(sql):
    """The pyarrow spelling of the flat filters (pyarrow prunes row groups by them)."""
    return {
        "name = 'Mary Smith'": [("name", "=", "Mary Smith")],
        "name >= 'Y'": [("name", ">=", "Y")],
    }.get(sql)


if __name__ == "__main__":
    main()
