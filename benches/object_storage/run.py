"""Bytes fetched from object storage vs bytes read locally; with --throughput, a cold
full scan against plain ranged GETs and a cold count(DISTINCT) under added latency
(see ./run)."""

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import boto3

QUERIES = [
    ("selective", "SELECT symbol, ts, close FROM ohlcv WHERE symbol = 'SPY' AND close > 470 ORDER BY ts LIMIT 5"),
    ("two columns", "SELECT count(DISTINCT symbol), sum(volume) FROM ohlcv"),
    ("time range", "SELECT avg(close) FROM ohlcv WHERE ts >= TIMESTAMP '2024-01-05 00:00:00' AND ts < TIMESTAMP '2024-01-06 00:00:00'"),
    ("all columns", "SELECT * FROM ohlcv WHERE close > 0 LIMIT 1 OFFSET 999999999"),
]


FULL_SCAN = "SELECT * FROM ohlcv WHERE close > 0 LIMIT 1 OFFSET 999999999"
DISTINCT = "SELECT count(DISTINCT symbol), sum(volume) FROM ohlcv"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LatencyProxy:
    """A loopback proxy in front of the S3 server that holds each request `delay_ms`
    before forwarding it (one request per connection, as the tests' fault proxy), and
    counts the requests it forwarded."""

    def __init__(self, upstream, delay_ms):
        self.upstream, self.delay = upstream, delay_ms / 1000.0
        self.requests = 0
        self.lock = threading.Lock()
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(256)
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client):
        with client:
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = client.recv(65536)
                if not chunk:
                    return
                data += chunk
            head, _, body = data.partition(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            length = 0
            for line in lines[1:]:
                key, _, value = line.partition(":")
                if key.strip().lower() == "content-length":
                    length = int(value.strip())
            while len(body) < length:
                chunk = client.recv(65536)
                if not chunk:
                    return
                body += chunk
            time.sleep(self.delay)
            with self.lock:
                self.requests += 1
            lines = [l for l in lines if not l.lower().startswith("connection:")]
            lines.append("Connection: close")
            forwarded = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body
            with socket.create_connection(("127.0.0.1", self.upstream)) as server:
                server.sendall(forwarded)
                while True:
                    chunk = server.recv(1 << 20)
                    if not chunk:
                        break
                    client.sendall(chunk)

    def close(self):
        self.listener.close()


def query(ringscan, sql, root, env, work, stop=True):
    """One cold run of `sql` (the root's daemon stopped first, unless `stop` is false):
    the stats JSON, and the command's own wall time in seconds."""
    if stop:
        subprocess.run([ringscan, "daemon", "stop", *root], env=env, stdin=subprocess.DEVNULL,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    out = os.path.join(work, "stats.json")
    started = time.monotonic()
    subprocess.run([ringscan, "query", "--no-cache", "--stats-json", out, sql, *root],
                   check=True, env=env, stdin=subprocess.DEVNULL,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.monotonic() - started
    with open(out) as f:
        return json.load(f), wall


def daemon_figures(ringscan, root, env, before=None):
    """The root's running daemon: minor page faults, CPU time (ms) and peak resident
    memory (MB, VmHWM) so far, less `before` (the same figures earlier) where given."""
    out = subprocess.run([ringscan, "daemon", "status", *root], env=env, check=True,
                         stdin=subprocess.DEVNULL, capture_output=True, text=True).stdout
    pid = int(out.split()[1])
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    tick_ms = 1000 / os.sysconf("SC_CLK_TCK")
    minflt, cpu_ms = int(fields[7]), (int(fields[11]) + int(fields[12])) * tick_ms
    with open(f"/proc/{pid}/status") as f:
        hwm_mb = next(int(l.split()[1]) for l in f if l.startswith("VmHWM")) / 1024
    if before:
        minflt, cpu_ms = minflt - before[0], cpu_ms - before[1]
    return minflt, cpu_ms, hwm_mb


def kept_daemon(ringscan, root, env, log):
    """`ringscan daemon run` for `root` kept up across queries, its column cache off: each
    scan's data is as cold as a fresh daemon's (its footers are cached, which the scan's
    timing does not include), its process is not."""
    subprocess.run([ringscan, "daemon", "stop", *root], env=env, stdin=subprocess.DEVNULL,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    proc = subprocess.Popen([ringscan, "daemon", "run", "--column-cache-bytes", "0", *root],
                            env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log)
    deadline = time.time() + 30
    while subprocess.run([ringscan, "daemon", "status", *root], env=env, stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode != 0:
        if time.time() > deadline or proc.poll() is not None:
            raise SystemExit(f"{ringscan} daemon run did not start")
        time.sleep(0.1)
    return proc


def bytes_fetched(args, env, work, data):
    roots = [["--data", args.root, "--state", os.path.join(work, "state")], ["--data", data]]
    print(f"ohlcv, {args.rows} rows, {args.ringscan}")
    print(f"{'query':<12} {'local read':>12} {'fetched':>12} {'ratio':>6} {'requests':>8} {'store wait ms':>13}")
    try:
        for name, sql in QUERIES:
            figures = [query(args.ringscan, sql, root, env, work)[0]["scan"] for root in roots]
            remote, local = figures
            ratio = remote["store_bytes_fetched"] / max(local["bytes_read"], 1)
            print(f"{name:<12} {local['bytes_read']:>12,} {remote['store_bytes_fetched']:>12,} "
                  f"{ratio:>6.2f} {remote['store_requests']:>8} {remote['store_wait_us'] / 1000:>13.1f}")
    finally:
        for root in roots:
            subprocess.run([args.ringscan, "daemon", "stop", *root], env=env,
                           stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def throughput(args, env, work, port, keys):
    """Target (a): a cold full scan's fetch throughput against plain ranged GETs of the
    same objects with the scan's most requests in flight (examples/s3_get, the same
    client), in the same run, interleaved. Target (b): a cold count(DISTINCT) through a
    proxy adding 20 ms to every request against the same proxy at 0 ms."""
    proxies = {ms: LatencyProxy(port, ms) for ms in (0, args.latency_ms)}
    # Each build's full scan in every round, against that round's plain GETs; with
    # --kept, each build's scan on a daemon kept up too (label "kept").
    builds = [(b, False) for b in (args.ringscan, *args.against)]
    if args.kept:
        builds += [(b, True) for b, _ in builds]
    directs = {b: ["--data", args.root, "--state", os.path.join(work, f"state-direct-{i}")]
               for i, b in enumerate(builds)}
    kept = {}
    via = {ms: ["--data", args.root, "--state", os.path.join(work, f"state-{ms}ms")]
           for ms in proxies}
    urls = [f"{args.scheme}://bench/{k}" for k in keys]
    scans, gets, distinct = {b: [] for b in builds}, {}, {ms: [] for ms in proxies}
    try:
        for i, b in enumerate(builds):
            if b[1]:
                log = open(os.path.join(work, f"kept-{i}.log"), "w")
                kept[b] = kept_daemon(b[0], directs[b], env, log)
        for rep in range(args.repeat):
            for concurrency, part in args.get_modes:
                out = subprocess.run([args.s3_get, str(concurrency), str(part), *urls], check=True,
                                     env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True)
                g = json.loads(out.stdout)
                gets.setdefault((concurrency, part), []).append(g["bytes"] / (g["wall_us"] / 1e6))
            for b in builds:
                ringscan, is_kept = b
                before = daemon_figures(ringscan, directs[b], env) if is_kept else None
                stats, wall = query(ringscan, FULL_SCAN, directs[b], env, work, stop=not is_kept)
                scan = stats["scan"]
                scans[b].append((scan["store_bytes_fetched"], scan["timings_us"]["total_us"], wall,
                                 scan["store_requests"],
                                 daemon_figures(ringscan, directs[b], env, before)))
            for ms in proxies:
                p_env = dict(env, **{args.endpoint_variable: f"http://127.0.0.1:{proxies[ms].port}"})
                before = proxies[ms].requests
                stats, wall = query(args.ringscan, DISTINCT, via[ms], p_env, work)
                distinct[ms].append((stats["latency_us"]["p50"] / 1000, wall * 1000,
                                     stats["scan"]["timings_us"]["total_us"] / 1000,
                                     proxies[ms].requests - before))
    finally:
        for b, root in [*((b[0], r) for b, r in directs.items()),
                        *((args.ringscan, v) for v in via.values())]:
            subprocess.run([b, "daemon", "stop", *root], env=env,
                           stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for proc in kept.values():
            proc.wait()
        for p in proxies.values():
            p.close()
    med = statistics.median
    mib = 1 << 20
    print(f"ohlcv, {args.rows} rows, {len(keys)} objects, {args.ringscan}; medians of {args.repeat} "
          "interleaved cold runs")
    print(f"(a) full scan: {FULL_SCAN}")
    best = 0
    for (concurrency, part), rates in gets.items():
        rate = med(rates)
        best = max(best, rate)
        print(f"  plain ranged GETs, {concurrency} in flight, {part / mib:g} MiB each: "
              f"{rate / mib:.1f} MiB/s")
    largest = gets[args.get_modes[0]]
    for b in builds:
        runs = scans[b]
        scan_rate = med([f / (us / 1e6) for f, us, _, _, _ in runs])
        rounds = [f / (us / 1e6) / g for (f, us, _, _, _), g in zip(runs, largest)]
        label = "" if len(builds) == 1 else f" ({b[0]}{', kept daemon' if b[1] else ''})"
        print(f"  scan{label}: {med([f for f, _, _, _, _ in runs]) / mib:.1f} MiB fetched in "
              f"{med([r for _, _, _, r, _ in runs]):.0f} requests, daemon scan "
              f"{med([us for _, us, _, _, _ in runs]) / 1000:.0f} ms, query "
              f"{med([w for _, _, w, _, _ in runs]) * 1000:.0f} ms: {scan_rate / mib:.1f} MiB/s")
        figures = [d for _, _, _, _, d in runs]
        print(f"    daemon{' (over the scan)' if b[1] else ' (its whole life)'}: "
              f"{med([d[0] for d in figures]):,.0f} minor faults, CPU "
              f"{med([d[1] for d in figures]):.0f} ms, VmHWM {med([d[2] for d in figures]):.0f} MB")
        print(f"    / best plain GETs: {scan_rate / best:.0%}; per round, / that round's "
              f"{args.get_modes[0][1] / mib:g} MiB GETs: median {med(rounds):.0%} "
              f"({', '.join(f'{r:.0%}' for r in rounds)}) (target >= 80%)")
    print(f"(b) {DISTINCT}, through a loopback proxy")
    for ms, runs in distinct.items():
        print(f"  +{ms:>2} ms per request: query {med([q for q, _, _, _ in runs]):.0f} ms "
              f"(command {med([w for _, w, _, _ in runs]):.0f} ms, daemon scan "
              f"{med([s for _, _, s, _ in runs]):.0f} ms), {med([r for _, _, _, r in runs]):.0f} requests")
    slow = med([q for q, _, _, _ in distinct[args.latency_ms]])
    fast = med([q for q, _, _, _ in distinct[0]])
    print(f"  +{args.latency_ms} ms / +0 ms: {slow / fast:.2f}x (target <= 1.5x)")


def range_cache(args, env, work):
    """--cache-dir: each query cold (its daemon stopped first) three ways, interleaved:
    without a cache dir, with an empty one (filled by the run), and with the one that run
    filled (a restarted daemon or a second host): requests, bytes fetched, query time."""
    modes = ["none", "empty", "warm"]
    figures = {(name, mode): [] for name, _ in QUERIES for mode in modes}
    state = os.path.join(work, "state-cache")
    root = ["--data", args.root, "--state", state]
    try:
        for rep in range(args.repeat):
            for name, sql in QUERIES:
                cache = os.path.join(work, f"ranges-{rep}-{name.replace(' ', '-')}")
                for mode in modes:
                    extra = [] if mode == "none" else ["--cache-dir", cache]
                    stats, wall = query(args.ringscan, sql, root + extra, env, work)
                    scan = stats["scan"]
                    figures[(name, mode)].append((scan["store_requests"], scan["store_bytes_fetched"],
                                                  stats["latency_us"]["p50"] / 1000, wall * 1000))
    finally:
        subprocess.run([args.ringscan, "daemon", "stop", *root], env=env,
                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    med = statistics.median
    print(f"ohlcv, {args.rows} rows, {args.ringscan}; medians of {args.repeat} interleaved cold runs "
          "(daemon stopped before each)")
    print(f"{'query':<12} {'cache dir':<9} {'requests':>8} {'fetched':>12} {'query ms':>9} {'command ms':>10}")
    for name, _ in QUERIES:
        for mode in modes:
            runs = figures[(name, mode)]
            print(f"{name:<12} {mode:<9} {med([r for r, _, _, _ in runs]):>8.0f} "
                  f"{med([b for _, b, _, _ in runs]):>12,.0f} {med([q for _, _, q, _ in runs]):>9.0f} "
                  f"{med([w for _, _, _, w in runs]):>10.0f}")


def upload(args, endpoint, data):
    """Puts the files below `data` (hidden entries skipped) into the bucket (container)
    `bench` under `root/`; returns their keys."""
    if args.azurite:
        from azure.storage.blob import BlobServiceClient
        key = ("Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/"
               "KBHBeksoGMGw==")
        service = BlobServiceClient.from_connection_string(
            f"DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey={key};"
            f"BlobEndpoint={endpoint}/devstoreaccount1;")
        container = service.create_container("bench")

        def put(path, name):
            with open(path, "rb") as f:
                container.upload_blob(name, f, overwrite=True)
    else:
        s3 = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id="bench",
                          aws_secret_access_key="bench", region_name="us-east-1")
        s3.create_bucket(Bucket="bench")

        def put(path, name):
            s3.upload_file(path, "bench", name)
    keys = []
    for d, dirs, files in os.walk(data):
        dirs[:] = [x for x in dirs if not x.startswith(".")]
        for f in sorted(files):
            p = os.path.join(d, f)
            keys.append("root/" + os.path.relpath(p, data))
            put(p, keys[-1])
    return keys


def main():
    target = os.environ["RINGSCAN_TARGET"]
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", default=None)
    default = os.path.join(target, "release", "ringscan")
    if not os.path.exists(default):
        default = os.path.join(target, "debug", "ringscan")
    parser.add_argument("--ringscan", default=default)
    parser.add_argument("--throughput", action="store_true",
                        help="targets (a) and (b) instead of bytes fetched per query")
    parser.add_argument("--range-cache", action="store_true",
                        help="cold queries without, with an empty and with a warm --cache-dir")
    parser.add_argument("--against", action="append", default=[], metavar="PATH",
                        help="with --throughput: other builds whose full scan runs in each "
                             "round too (an A/B in one run)")
    parser.add_argument("--kept", action="store_true",
                        help="with --throughput: each build's full scan on a daemon kept up "
                             "(column cache off) too, against the fresh daemon's")
    parser.add_argument("--s3-get", default=os.path.join(target, "release", "examples", "s3_get"))
    parser.add_argument("--s3s-fs", metavar="PATH",
                        help="serve the bucket with s3s-fs (a Rust S3 server over a directory, "
                             "which answers requests concurrently: `cargo install s3s-fs@0.14.1 "
                             "--features binary --locked --root DIR`) instead of moto; note that "
                             "0.14.1 hashes the whole object (MD5, for the ETag) on every GET "
                             "of an object without stored metadata, whatever the range")
    parser.add_argument("--azurite", metavar="PATH",
                        help="serve the container with Azurite's blob service (PATH: its "
                             "azurite-blob command, as the az:// tests install it under "
                             "<target>/tmp/azurite/node_modules/.bin) and read az:// URLs "
                             "through the Azure client instead of s3:// from moto")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--latency-ms", type=int, default=20)
    args = parser.parse_args()
    args.rows = args.rows or ("10M" if args.throughput else "1M")
    # The scan's most requests in flight (MAX_CONCURRENT_REQUESTS per read) and its
    # request sizes (one row group, or 8 MiB of consecutive ones).
    args.get_modes = [(16, 8 << 20), (16, 1 << 20)]
    work = tempfile.mkdtemp(prefix="ringscan-s3-bench-")
    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("AWS_", "AZURE_", "AZURITE_"))}
    if args.azurite:
        args.scheme, args.endpoint_variable = "az", "AZURITE_BLOB_STORAGE_URL"
        env.update(AZURE_STORAGE_USE_EMULATOR="true")
    else:
        args.scheme, args.endpoint_variable = "s3", "AWS_ENDPOINT_URL"
        env.update(AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench",
                   AWS_REGION="us-east-1", AWS_ALLOW_HTTP="true")
    env[args.endpoint_variable] = endpoint
    args.root = f"{args.scheme}://bench/root"
    log = open(os.path.join(work, "server.log"), "w")
    if args.azurite:
        # Blobs in memory, as moto keeps its objects; no telemetry (nothing leaves
        # the machine).
        command = [args.azurite, "--blobHost", "127.0.0.1", "--blobPort", str(port),
                   "--inMemoryPersistence", "--disableTelemetry", "--skipApiVersionCheck",
                   "--silent"]
    elif args.s3s_fs:
        store = os.path.join(work, "store")
        os.makedirs(store)
        command = [args.s3s_fs, "--host", "127.0.0.1", "--port", str(port),
                   "--access-key", "bench", "--secret-key", "bench", store]
    else:
        command = [os.path.join(os.path.dirname(sys.executable), "moto_server"),
                   "-H", "127.0.0.1", "-p", str(port)]
    print(f"# server: {os.path.basename(command[0])}", flush=True)
    moto = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=log)
    data = os.path.join(work, "data")
    try:
        deadline = time.time() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.time() > deadline:
                    raise SystemExit(f"{command[0]} did not start")
                time.sleep(0.1)
        subprocess.run([args.ringscan, "generate", "ohlcv", "--rows", args.rows, "--data", data,
                        "--quiet"], check=True, stdin=subprocess.DEVNULL)
        keys = upload(args, endpoint, data)
        if args.throughput:
            throughput(args, env, work, port, keys)
        elif args.range_cache:
            range_cache(args, env, work)
        else:
            bytes_fetched(args, env, work, data)
    finally:
        moto.kill()
        moto.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
