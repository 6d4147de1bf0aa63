"""Writes the differential corpus's foreign tables: Parquet written by pyarrow and by
DuckDB themselves, with different row-group sizes, codecs, dictionary settings and NULLs.

Usage: make_data.py DATA_DIR
Creates DATA_DIR/pa_trades/*.parquet (pyarrow) and DATA_DIR/duck_trades/*.parquet
(DuckDB); DATA_DIR/hive_t (hive partitions DuckDB types as BIGINT, DATE and VARCHAR:
leading zeros, a date without padding, NULL markers, an escape); DATA_DIR/floats_t
(NaN of both signs, both zeros, the infinities and NULLs, in 3-row row groups with a
page index, so that pruning meets them). Deterministic: the same rows every time.
"""
import datetime as dt
import os
import random
import struct
import sys

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

ROWS = 30_000


def trades(seed: int, start: int, rows: int) -> pa.Table:
    rng = random.Random(seed)
    sides = ["buy", "sell", "short", None]
    venues = ["XNAS", "XNYS", "ARCX", "BATS", "IEXG"]
    base = dt.datetime(2024, 3, 1, 9, 30)
    ids, prices, qtys, side, venue, ts, day, flag, note = ([] for _ in range(9))
    for i in range(start, start + rows):
        ids.append(i)
        r = rng.random()
        prices.append(None if r < 0.03 else round(100 + rng.gauss(0, 15), 4))
        qtys.append(None if rng.random() < 0.02 else rng.randint(-50, 5000))
        side.append(rng.choice(sides))
        venue.append(venues[int(rng.paretovariate(1.2)) % len(venues)])
        t = base + dt.timedelta(seconds=i * 7 + rng.randint(0, 6))
        ts.append(t)
        day.append(t.date())
        flag.append(None if rng.random() < 0.05 else rng.random() < 0.3)
        note.append(None if rng.random() < 0.5 else f"n{rng.randint(0, 999):03d}")
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "price": pa.array(prices, pa.float64()),
            "qty": pa.array(qtys, pa.int32()),
            "side": pa.array(side, pa.string()),
            "venue": pa.array(venue, pa.string()),
            "ts": pa.array(ts, pa.timestamp("us")),
            "day": pa.array(day, pa.date32()),
            "flag": pa.array(flag, pa.bool_()),
            "note": pa.array(note, pa.string()),
        }
    )


def main() -> None:
    root = sys.argv[1]
    pa_dir = os.path.join(root, "pa_trades")
    os.makedirs(pa_dir, exist_ok=True)
    third = ROWS // 3
    settings = [
        dict(row_group_size=1_000, compression="snappy", use_dictionary=True,
             write_statistics=True, write_page_index=True, data_page_size=4096),
        dict(row_group_size=4_096, compression="zstd", use_dictionary=False,
             write_statistics=True, write_page_index=False),
        dict(row_group_size=third, compression="none", use_dictionary=["side", "venue"],
             write_statistics=False),
    ]
    for n, opts in enumerate(settings):
        table = trades(seed=n, start=n * third, rows=third)
        pq.write_table(table, os.path.join(pa_dir, f"part-{n}.parquet"), **opts)

    duck_dir = os.path.join(root, "duck_trades")
    os.makedirs(duck_dir, exist_ok=True)
    con = duckdb.connect()
    con.register("src", trades(seed=7, start=0, rows=ROWS))
    con.execute(
        f"COPY (SELECT * FROM src) TO '{duck_dir}/part-0.parquet' "
        "(FORMAT parquet, ROW_GROUP_SIZE 2048, COMPRESSION zstd)"
    )
    hive(root)
    floats(root)


HIVE_DIRS = [
    "year=2023/day=2023-12-31/code=007",
    "year=2024/day=2024-1-5/code=12",
    "year=2024/day=2024-01-06/code=abc",
    "year=__HIVE_DEFAULT_PARTITION__/day=2024-02-01/code=x%2Fy",
    "year=-5/day=NULL/code=NULL",
]


def hive(root: str) -> None:
    for n, d in enumerate(HIVE_DIRS):
        path = os.path.join(root, "hive_t", d)
        os.makedirs(path, exist_ok=True)
        rng = random.Random(100 + n)
        ids = list(range(n * 50, n * 50 + 50))
        table = pa.table({
            "id": pa.array(ids, pa.int64()),
            "v": pa.array([round(rng.random(), 3) for _ in ids], pa.float64()),
        })
        pq.write_table(table, os.path.join(path, "part-0.parquet"))


def floats(root: str) -> None:
    neg_nan = struct.unpack("<d", struct.pack("<Q", 0xFFF8_0000_0000_0000))[0]
    nan, inf = float("nan"), float("inf")
    xs = [nan, -0.0, 0.0, 1.5, inf, -inf, None, 5.0, nan, -2.5, 0.0, 3.0, neg_nan,
          nan, nan, 2.0, -0.0, -0.0, 1.0, None, -inf]
    ints = [i - 10 if i % 7 else None for i in range(len(xs))]
    table = pa.table({
        "id": pa.array(range(len(xs)), pa.int64()),
        "x": pa.array(xs, pa.float64()),
        "f": pa.array(xs, pa.float32()),
        "i": pa.array(ints, pa.int64()),
    })
    os.makedirs(os.path.join(root, "floats_t"), exist_ok=True)
    pq.write_table(table, os.path.join(root, "floats_t", "part-0.parquet"),
                   row_group_size=3, write_page_index=True, data_page_size=64,
                   use_dictionary=False)


if __name__ == "__main__":
    main()
