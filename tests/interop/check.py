"""Reads a ringscan dataset directory with pyarrow and DuckDB; prints one JSON object.

Usage: check.py DIR QUERY_SQL
  DIR        a directory of Parquet files, possibly hive-partitioned
  QUERY_SQL  an aggregate over the table `t` whose single value both engines must agree on;
             pyarrow's answer comes from DuckDB over the pyarrow table (so the value is
             computed on pyarrow's decoding, not DuckDB's own reader)
"""
import json
import sys

import duckdb
import pyarrow.dataset as ds

root, query = sys.argv[1], sys.argv[2]

dataset = ds.dataset(root, format="parquet", partitioning="hive")
table = dataset.to_table()
pa_columns = [[f.name, str(f.type)] for f in table.schema]

con = duckdb.connect()
glob = f"{root}/**/*.parquet"
con.execute(
    f"CREATE VIEW t AS SELECT * FROM read_parquet('{glob}', hive_partitioning = true)"
)
duck_rows = con.execute("SELECT count(*) FROM t").fetchone()[0]
duck_columns = [[r[0], r[1]] for r in con.execute("DESCRIBE t").fetchall()]
duck_value = con.execute(query).fetchone()[0]

pa_con = duckdb.connect()
pa_con.register("t", table)
pa_value = pa_con.execute(query).fetchone()[0]

print(
    json.dumps(
        {
            "pyarrow": {"rows": table.num_rows, "columns": pa_columns, "value": str(pa_value)},
            "duckdb": {"rows": duck_rows, "columns": duck_columns, "value": str(duck_value)},
        }
    )
)
