"""Bytes fetched from object storage vs bytes read locally (see ./run)."""

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

import boto3

QUERIES = [
    ("selective", "SELECT symbol, ts, close FROM ohlcv WHERE symbol = 'SPY' AND close > 470 ORDER BY ts LIMIT 5"),
    ("two columns", "SELECT count(DISTINCT symbol), sum(volume) FROM ohlcv"),
    ("time range", "SELECT avg(close) FROM ohlcv WHERE ts >= TIMESTAMP '2024-01-05 00:00:00' AND ts < TIMESTAMP '2024-01-06 00:00:00'"),
    ("all columns", "SELECT * FROM ohlcv WHERE close > 0 LIMIT 1 OFFSET 999999999"),
]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    target = os.environ["RINGSCAN_TARGET"]
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", default="1M")
    default = os.path.join(target, "release", "ringscan")
    if not os.path.exists(default):
        default = os.path.join(target, "debug", "ringscan")
    parser.add_argument("--ringscan", default=default)
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="ringscan-s3-bench-")
    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(AWS_ENDPOINT_URL=endpoint, AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench",
               AWS_REGION="us-east-1", AWS_ALLOW_HTTP="true")
    server = os.path.join(os.path.dirname(sys.executable), "moto_server")
    log = open(os.path.join(work, "moto.log"), "w")
    moto = subprocess.Popen([server, "-H", "127.0.0.1", "-p", str(port)],
                            stdin=subprocess.DEVNULL, stdout=log, stderr=log)
    data = os.path.join(work, "data")
    state = os.path.join(work, "state")
    roots = [["--data", f"s3://bench/root", "--state", state], ["--data", data]]
    try:
        deadline = time.time() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.time() > deadline:
                    raise SystemExit("moto_server did not start")
                time.sleep(0.1)
        subprocess.run([args.ringscan, "generate", "ohlcv", "--rows", args.rows, "--data", data,
                        "--quiet"], check=True, stdin=subprocess.DEVNULL)
        s3 = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id="bench",
                          aws_secret_access_key="bench", region_name="us-east-1")
        s3.create_bucket(Bucket="bench")
        for d, dirs, files in os.walk(data):
            dirs[:] = [x for x in dirs if not x.startswith(".")]
            for f in files:
                p = os.path.join(d, f)
                s3.upload_file(p, "bench", "root/" + os.path.relpath(p, data))
        print(f"ohlcv, {args.rows} rows, {args.ringscan}")
        print(f"{'query':<12} {'local read':>12} {'s3 fetched':>12} {'ratio':>6} {'requests':>8} {'store wait ms':>13}")
        for name, sql in QUERIES:
            figures = []
            for root in roots:
                out = os.path.join(work, "stats.json")
                subprocess.run([args.ringscan, "query", "--no-cache", "--stats-json", out, sql, *root],
                               check=True, env=env, stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                with open(out) as f:
                    figures.append(json.load(f)["scan"])
            remote, local = figures
            ratio = remote["store_bytes_fetched"] / max(local["bytes_read"], 1)
            print(f"{name:<12} {local['bytes_read']:>12,} {remote['store_bytes_fetched']:>12,} "
                  f"{ratio:>6.2f} {remote['store_requests']:>8} {remote['store_wait_us'] / 1000:>13.1f}")
    finally:
        for root in roots:
            subprocess.run([args.ringscan, "daemon", "stop", *root], env=env,
                           stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        moto.kill()
        moto.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
