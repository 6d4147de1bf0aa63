//! Issue 20: `--data s3://bucket/prefix` against a real S3 API server on loopback (moto's,
//! from the interop virtual environment), started and stopped by the test.
//!
//! - Differential: the same queries over the bucket and over the local copy of its
//!   files give the same answers (tables, hive partitions, quoted globs, pruning,
//!   statistics-only answers).
//! - Bad input: a missing bucket, bad credentials, a non-Parquet and a truncated object
//!   each fail with a message naming the object and the cause, and the daemon of the
//!   root goes on serving; writes into an object-storage root are refused.
//! - `gs://` through the GCS client against moto; `az://` through the Azure client
//!   against Azurite (Microsoft's Blob Storage emulator, installed by npm under
//!   `target/`), differential and bad input as over S3.
//!
//! Without Python, npm or the package registries the tests are skipped (a failure under
//! `RINGSCAN_REQUIRE_INTEROP=1`, as CI runs them).

mod common;

use std::fs::File;
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow_array::{Float64Array, Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema};
use parquet::arrow::ArrowWriter;
use parquet::file::properties::WriterProperties;

use common::azurite::{azurite_or_skip, Azurite};
use common::python::python_or_skip;

/// The moto server of one test: killed and reaped when dropped, on every path.
struct Moto {
    child: Child,
    port: u16,
    python: PathBuf,
}

impl Moto {
    /// Starts `moto_server -H 127.0.0.1 -p PORT` (stdin from /dev/null, output to
    /// `log`), with `env` added to its environment, and waits until it accepts
    /// connections.
    fn start(python: &Path, log: &Path, env: &[(&str, &str)]) -> Self {
        let server = python.with_file_name("moto_server");
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let out = File::create(log).expect("moto log");
        let child = Command::new(&server)
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(out.try_clone().expect("log"))
            .stderr(out)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", server.display()));
        let moto = Self {
            child,
            port,
            python: python.to_path_buf(),
        };
        common::wait_listening("moto_server", port, log);
        moto
    }

    fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Runs `script` with boto3 against this server (`s3`: its client).
    fn boto(&self, script: &str) {
        let prelude = format!(
            "import boto3, os, sys\n\
             s3 = boto3.client('s3', endpoint_url='{}', aws_access_key_id='test', \
             aws_secret_access_key='test', region_name='us-east-1')\n",
            self.endpoint()
        );
        run_script(&self.python, "boto3", &format!("{prelude}{script}"));
    }

    /// Uploads every file below `dir` (hidden entries skipped) to `bucket/prefix/...`.
    fn upload_dir(&self, dir: &Path, bucket: &str, prefix: &str) {
        self.boto(&format!(
            "root = {dir:?}\n\
             for d, dirs, files in os.walk(root):\n\
             \x20   dirs[:] = [x for x in dirs if not x.startswith('.')]\n\
             \x20   for f in files:\n\
             \x20       p = os.path.join(d, f)\n\
             \x20       key = {prefix:?} + '/' + os.path.relpath(p, root)\n\
             \x20       s3.upload_file(p, {bucket:?}, key)\n",
            dir = dir.display().to_string(),
        ));
    }

    fn put(&self, bucket: &str, key: &str, bytes: &[u8]) {
        let file = tempfile::NamedTempFile::new().expect("temp file");
        std::fs::write(file.path(), bytes).expect("write");
        self.boto(&format!(
            "s3.upload_file({:?}, {bucket:?}, {key:?})",
            file.path().display().to_string()
        ));
    }
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `ringscan <args> --data <data> [--state <state>]` with the S3 client's environment
/// pointed at `endpoint` (no other `AWS_*`, `GOOGLE_*`, `AZURE_*` or `AZURITE_*` variable inherited).
fn ringscan(args: &[&str], data: &str, state: Option<&Path>, endpoint: &str) -> Output {
    ringscan_with(args, data, state, endpoint, "test")
}

fn ringscan_with(
    args: &[&str],
    data: &str,
    state: Option<&Path>,
    endpoint: &str,
    key_id: &str,
) -> Output {
    ringscan_env(
        args,
        data,
        state,
        &[
            ("AWS_ENDPOINT_URL", endpoint),
            ("AWS_ACCESS_KEY_ID", key_id),
            ("AWS_SECRET_ACCESS_KEY", "test"),
            ("AWS_REGION", "us-east-1"),
            ("AWS_ALLOW_HTTP", "true"),
        ],
    )
}

/// `psql -c command` against the host on `port`: its rows unaligned, `,` between
/// fields (a failure fails the test).
fn psql_rows(port: u16, command: &str) -> String {
    let out = Command::new("psql")
        .args(["-h", "127.0.0.1", "-p", &port.to_string()])
        .args(["-U", "ringscan", "-d", "ringscan", "-X", "-At", "-F", ","])
        .args(["-v", "ON_ERROR_STOP=1", "-c", command])
        .env("PGCONNECT_TIMEOUT", "10")
        .stdin(Stdio::null())
        .output()
        .expect("run psql");
    assert!(out.status.success(), "{command}: {}", stderr(&out));
    stdout(&out)
}

/// Stops the daemons of the roots given, when dropped.
struct Daemons<'a> {
    roots: Vec<(String, Option<PathBuf>)>,
    endpoint: &'a str,
}

impl Drop for Daemons<'_> {
    fn drop(&mut self) {
        for (data, state) in &self.roots {
            let _ = ringscan(&["daemon", "stop"], data, state.as_deref(), self.endpoint);
        }
    }
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A moto server on loopback whose bucket `lake` holds, under `r/`, the files of
/// [`write_partitioned`] (also written under `dir/data`, returned).
fn partitioned_lake(python: &Path, dir: &Path) -> (Moto, PathBuf) {
    let moto = Moto::start(python, &dir.join("moto.log"), &[]);
    let local = dir.join("data");
    std::fs::create_dir_all(&local).expect("mkdir");
    write_partitioned(&local);
    moto.boto("s3.create_bucket(Bucket='lake')");
    moto.upload_dir(&local, "lake", "r");
    (moto, local)
}

/// The venv's python and [`partitioned_lake`] in a fresh temporary directory
/// (returned, to keep it), or `None` after saying why `test` is skipped (no venv).
fn partitioned_lake_or_skip(
    test: &str,
) -> Option<(&'static Path, tempfile::TempDir, Moto, PathBuf)> {
    let python = python_or_skip(test)?;
    let dir = tempfile::tempdir().expect("tempdir");
    let (moto, local) = partitioned_lake(python, dir.path());
    Some((python, dir, moto, local))
}

/// A hive-partitioned table `part` (`region=.../year=.../p.parquet`), several row
/// groups per file, with a page index.
fn write_partitioned(data: &Path) {
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("amount", DataType::Float64, true),
        Field::new("note", DataType::Utf8, true),
    ]));
    for (r, region) in ["east", "west"].iter().enumerate() {
        for year in [2023i64, 2024] {
            let dir = data
                .join("part")
                .join(format!("region={region}"))
                .join(format!("year={year}"));
            std::fs::create_dir_all(&dir).expect("mkdir");
            let base = (r as i64 * 2 + (year - 2023)) * 10_000;
            let ids: Vec<i64> = (base..base + 5000).collect();
            let batch = RecordBatch::try_new(
                Arc::clone(&schema),
                vec![
                    Arc::new(Int64Array::from(ids.clone())),
                    Arc::new(Float64Array::from_iter(
                        ids.iter()
                            .map(|i| (i % 7 != 0).then_some((*i as f64) * 0.25)),
                    )),
                    Arc::new(StringArray::from_iter(
                        ids.iter().map(|i| Some(format!("n{}", i % 13))),
                    )),
                ],
            )
            .expect("batch");
            let props = WriterProperties::builder()
                .set_max_row_group_row_count(Some(1000))
                .set_data_page_row_count_limit(250)
                .set_write_batch_size(250)
                .build();
            let file = File::create(dir.join("p.parquet")).expect("create");
            let mut writer =
                ArrowWriter::try_new(file, Arc::clone(&schema), Some(props)).expect("writer");
            writer.write(&batch).expect("write");
            writer.close().expect("close");
        }
    }
}

/// The generator's datasets and the partitioned table, in `data`.
fn make_data(data: &Path) {
    std::fs::create_dir_all(data).expect("mkdir");
    for args in [
        &[
            "generate",
            "ohlcv",
            "--rows",
            "40000",
            "--row-group-rows",
            "8192",
            "--writers",
            "2",
        ][..],
        &[
            "generate",
            "wide",
            "--rows",
            "12000",
            "--row-group-rows",
            "4096",
        ][..],
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_ringscan"))
            .args(args)
            .arg("--data")
            .arg(data)
            .stdin(Stdio::null())
            .output()
            .expect("generate");
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
    }
    write_partitioned(data);
}

const QUERIES: &[&str] = &[
    "SELECT count(*) FROM ohlcv",
    "SELECT symbol, count(*), min(close), max(close), sum(volume) FROM ohlcv GROUP BY symbol ORDER BY symbol",
    "SELECT * FROM ohlcv WHERE close >= 470 ORDER BY ts, symbol LIMIT 20",
    "SELECT symbol, ts, close FROM ohlcv WHERE symbol = 'SPY' AND ts < TIMESTAMP '2024-01-03 00:00:00' ORDER BY ts LIMIT 50",
    "SELECT count(DISTINCT symbol) FROM 'ohlcv/*.parquet'",
    "SELECT region, year, count(*), sum(amount) FROM part GROUP BY region, year ORDER BY region, year",
    "SELECT id, amount, note FROM part WHERE year = 2024 AND id BETWEEN 30100 AND 30110 ORDER BY id",
    "SELECT count(*) FROM 'part/region=west/**/*.parquet' WHERE note = 'n3'",
    "SELECT min(id), max(id) FROM part",
    "SELECT count(*), sum(CASE WHEN amount IS NULL THEN 1 ELSE 0 END) FROM part WHERE region = 'east'",
    "SELECT * FROM wide ORDER BY 1 LIMIT 5",
    "SELECT count(*) FROM wide w JOIN part p ON w.order_id = p.id",
];

#[test]
fn queries_over_a_bucket_answer_as_over_the_local_copy() {
    let Some(python) = python_or_skip("queries_over_a_bucket_answer_as_over_the_local_copy") else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let moto = Moto::start(python, &dir.path().join("moto.log"), &[]);
    let local = dir.path().join("data");
    make_data(&local);
    moto.boto("s3.create_bucket(Bucket='lake')");
    moto.upload_dir(&local, "lake", "root/v1");
    let url = "s3://lake/root/v1";
    let state = dir.path().join("state");
    let endpoint = moto.endpoint();
    let local_text = local.display().to_string();
    let _daemons = Daemons {
        roots: vec![
            (url.to_owned(), Some(state.clone())),
            (local_text.clone(), None),
        ],
        endpoint: &endpoint,
    };
    for sql in QUERIES {
        let args = ["query", "--format", "csv", sql];
        let remote = ringscan(&args, url, Some(&state), &endpoint);
        let here = ringscan(&args, &local_text, None, &endpoint);
        assert!(here.status.success(), "{sql} (local): {}", stderr(&here));
        assert!(remote.status.success(), "{sql} (s3): {}", stderr(&remote));
        assert_eq!(stdout(&remote), stdout(&here), "{sql}");
        assert!(stdout(&remote).lines().count() > 1, "{sql}: no rows");
    }

    // Objects named by URL in FROM, from the bucket's root and from a local root.
    let by_url = "SELECT region, year, count(*) FROM 's3://lake/root/v1/part/**/*.parquet' \
                  WHERE id % 2 = 0 GROUP BY region, year ORDER BY region, year";
    let by_path = "SELECT region, year, count(*) FROM 'part/**/*.parquet' \
                   WHERE id % 2 = 0 GROUP BY region, year ORDER BY region, year";
    let expected = ringscan(
        &["query", "--format", "csv", by_path],
        &local_text,
        None,
        &endpoint,
    );
    assert!(expected.status.success(), "{}", stderr(&expected));
    for (data, state) in [(url, Some(state.as_path())), (local_text.as_str(), None)] {
        let out = ringscan(
            &["query", "--format", "csv", by_url],
            data,
            state,
            &endpoint,
        );
        assert!(out.status.success(), "{data}: {}", stderr(&out));
        assert_eq!(stdout(&out), stdout(&expected), "{data}");
    }

    // Pruning works as on local files: the selective query reads a fraction.
    let selective = "SELECT id, amount FROM part WHERE year = 2024 AND id BETWEEN 30100 AND 30110";
    let stats = ringscan(
        &["query", "--stats", selective],
        url,
        Some(&state),
        &endpoint,
    );
    assert!(stats.status.success(), "{}", stderr(&stats));
    let text = stderr(&stats);
    assert!(text.contains("pruned"), "{text}");
    assert!(text.contains("object store: "), "{text}");

    // A rewritten object is read at its new version, never from the footer cache.
    std::fs::remove_dir_all(local.join("part/region=east")).expect("rm");
    std::fs::remove_dir_all(local.join("part/region=west/year=2023")).expect("rm");
    let one = local.join("part/region=west/year=2024/p.parquet");
    let bytes = std::fs::read(&one).expect("read");
    moto.boto(
        "r = s3.list_objects_v2(Bucket='lake', Prefix='root/v1/part/')\n\
               for o in r.get('Contents', []): s3.delete_object(Bucket='lake', Key=o['Key'])",
    );
    moto.put(
        "lake",
        "root/v1/part/region=west/year=2024/p.parquet",
        &bytes,
    );
    // The daemon reuses a listing for --list-ttl (1 s).
    std::thread::sleep(Duration::from_millis(1200));
    let sql = "SELECT region, year, count(*), sum(amount) FROM part GROUP BY region, year ORDER BY region, year";
    let args = ["query", "--format", "csv", sql];
    let remote = ringscan(&args, url, Some(&state), &endpoint);
    let here = ringscan(&args, &local_text, None, &endpoint);
    assert!(remote.status.success(), "{}", stderr(&remote));
    assert_eq!(stdout(&remote), stdout(&here));
    assert_eq!(stdout(&remote).lines().count(), 2, "{}", stdout(&remote));
}

#[test]
fn bad_objects_buckets_and_credentials_are_named_and_the_daemon_serves_on() {
    let Some((python, dir, moto, local)) = partitioned_lake_or_skip(
        "bad_objects_buckets_and_credentials_are_named_and_the_daemon_serves_on",
    ) else {
        return;
    };
    let good = std::fs::read(local.join("part/region=east/year=2023/p.parquet")).expect("read");
    moto.put(
        "lake",
        "r/junk/x.parquet",
        b"this is not a parquet file at all",
    );
    moto.put("lake", "r/cut/x.parquet", &good[..good.len() / 2]);
    moto.put("lake", "r/tiny/x.parquet", b"PAR1");
    let url = "s3://lake/r";
    let state = dir.path().join("state");
    let endpoint = moto.endpoint();
    let missing_state = dir.path().join("state-missing");
    let _daemons = Daemons {
        roots: vec![
            (url.to_owned(), Some(state.clone())),
            (
                "s3://no-such-bucket/r".to_owned(),
                Some(missing_state.clone()),
            ),
        ],
        endpoint: &endpoint,
    };
    let query = |sql: &str| {
        ringscan(
            &["query", "--format", "csv", sql],
            url,
            Some(&state),
            &endpoint,
        )
    };
    let count = "SELECT count(*) FROM part";
    let first = query(count);
    assert!(first.status.success(), "{}", stderr(&first));
    assert_eq!(stdout(&first), "count(*)\n20000\n");

    for (table, object, cause) in [
        (
            "junk",
            "s3://lake/r/junk/x.parquet",
            "corrupt or truncated Parquet file",
        ),
        (
            "cut",
            "s3://lake/r/cut/x.parquet",
            "corrupt or truncated Parquet file",
        ),
        (
            "tiny",
            "s3://lake/r/tiny/x.parquet",
            "corrupt or truncated Parquet file",
        ),
    ] {
        let out = query(&format!("SELECT * FROM {table}"));
        let text = stderr(&out);
        assert!(!out.status.success(), "{table}: {}", stdout(&out));
        assert!(text.contains(object), "{table}: {text}");
        assert!(text.contains(cause), "{table}: {text}");
        assert!(!text.contains("panicked"), "{table}: {text}");
        // The daemon is still there and answers.
        let again = query(count);
        assert!(again.status.success(), "after {table}: {}", stderr(&again));
        assert_eq!(stdout(&again), "count(*)\n20000\n");
    }
    let out = query("SELECT * FROM nothing_here");
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("no table \"nothing_here\""),
        "{}",
        stderr(&out)
    );

    let out = query("CREATE TABLE t2 (a BIGINT)");
    assert!(!out.status.success(), "{}", stdout(&out));
    assert!(
        stderr(&out).contains("object-storage root"),
        "{}",
        stderr(&out)
    );
    let out = ringscan(&["ingest", "t2", "-"], url, None, &endpoint);
    assert!(!out.status.success());

    let out = ringscan(
        &["query", "SELECT count(*) FROM part"],
        "s3://no-such-bucket/r",
        Some(&missing_state),
        &endpoint,
    );
    assert!(!out.status.success(), "{}", stdout(&out));
    let text = stderr(&out);
    assert!(text.contains("s3://no-such-bucket/r/part"), "{text}");
    assert!(
        text.contains("bucket \"no-such-bucket\" does not exist"),
        "{text}"
    );

    // Bad credentials: a second server that checks them (moto's IAM emulation).
    let strict = Moto::start(
        python,
        &dir.path().join("moto-strict.log"),
        &[("INITIAL_NO_AUTH_ACTION_COUNT", "0")],
    );
    let strict_state = dir.path().join("state-strict");
    let strict_endpoint = strict.endpoint();
    let _strict_daemon = Daemons {
        roots: vec![(url.to_owned(), Some(strict_state.clone()))],
        endpoint: &strict_endpoint,
    };
    let out = ringscan_with(
        &["query", "SELECT count(*) FROM part"],
        url,
        Some(&strict_state),
        &strict_endpoint,
        "AKIAWRONGWRONGWRONG1",
    );
    assert!(!out.status.success(), "{}", stdout(&out));
    let text = stderr(&out);
    assert!(text.contains("s3://lake/r/part"), "{text}");
    assert!(text.contains("access denied"), "{text}");
}

#[test]
fn daemon_commands_and_the_postgres_host_take_an_s3_root() {
    let Some((python, dir, moto, local)) =
        partitioned_lake_or_skip("daemon_commands_and_the_postgres_host_take_an_s3_root")
    else {
        return;
    };
    let url = "s3://lake/r";
    let endpoint = moto.endpoint();
    let state = dir.path().join("state");
    let host_state = dir.path().join("host-state");
    let _daemons = Daemons {
        roots: vec![
            (url.to_owned(), Some(state.clone())),
            (url.to_owned(), Some(host_state.clone())),
        ],
        endpoint: &endpoint,
    };

    let started = ringscan(&["daemon", "start"], url, Some(&state), &endpoint);
    assert!(started.status.success(), "{}", stderr(&started));
    assert!(stdout(&started).contains("started"), "{}", stdout(&started));
    assert!(state.join(".ringscan/io.sock").exists());
    let status = ringscan(&["daemon", "status"], url, Some(&state), &endpoint);
    assert!(status.status.success(), "{}", stderr(&status));
    assert!(
        stdout(&status).contains("s3://lake/r"),
        "{}",
        stdout(&status)
    );
    // `--state` is for object-storage roots only.
    let local_text = local.display().to_string();
    let refused = ringscan(&["daemon", "status"], &local_text, Some(&state), &endpoint);
    assert!(!refused.status.success());
    assert!(stderr(&refused).contains("--state"), "{}", stderr(&refused));

    // The host, with the S3 client's environment for the daemon it starts.
    let log = dir.path().join("host.log");
    let out = File::create(&log).expect("log");
    let mut command = Command::new(env!("CARGO_BIN_EXE_ringscan"));
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("AWS_") {
            command.env_remove(name);
        }
    }
    let child = command
        .args(["serve", "--listen", "127.0.0.1:0", "--data", url, "--state"])
        .arg(&host_state)
        .env("AWS_ENDPOINT_URL", &endpoint)
        .env("AWS_ACCESS_KEY_ID", "test")
        .env("AWS_SECRET_ACCESS_KEY", "test")
        .env("AWS_REGION", "us-east-1")
        .env("AWS_ALLOW_HTTP", "true")
        .stdin(Stdio::null())
        .stdout(out.try_clone().expect("log"))
        .stderr(out)
        .spawn()
        .expect("spawn ringscan serve");
    let mut host = common::serve::Host { child, port: 0 };
    let deadline = Instant::now() + Duration::from_secs(30);
    while host.port == 0 {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        if let Some(port) = text
            .lines()
            .find_map(|l| l.strip_prefix("listening on 127.0.0.1:"))
        {
            host.port = port.trim().parse().expect("port");
        }
        assert!(
            host.child.try_wait().expect("wait").is_none(),
            "ringscan serve exited: {text}"
        );
        assert!(Instant::now() < deadline, "no 'listening on' line: {text}");
        std::thread::sleep(Duration::from_millis(20));
    }
    let script = format!(
        "import psycopg\n\
         c = psycopg.connect('host=127.0.0.1 port={} user=me')\n\
         print(c.execute('SELECT region, count(*) FROM part WHERE year = 2024 \
         GROUP BY region ORDER BY region').fetchall())\n\
         print(c.execute(\"SELECT pg_table_size(oid) FROM pg_class WHERE relname = 'part'\").fetchall())\n",
        host.port
    );
    let out = Command::new(python)
        .args(["-c", &script])
        .stdin(Stdio::null())
        .output()
        .expect("python");
    assert!(
        out.status.success(),
        "{}\nhost log:\n{}",
        stderr(&out),
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    // pg_table_size: the bucket's objects, as the daemon listed them (the host's state
    // directory holds none).
    fn parquet_bytes(dir: &Path) -> u64 {
        std::fs::read_dir(dir)
            .expect("read_dir")
            .flatten()
            .map(|e| {
                let path = e.path();
                if path.is_dir() {
                    parquet_bytes(&path)
                } else if path.extension().is_some_and(|x| x == "parquet") {
                    e.metadata().expect("metadata").len()
                } else {
                    0
                }
            })
            .sum()
    }
    let size = parquet_bytes(&local.join("part"));
    assert!(size > 0);
    assert_eq!(
        stdout(&out).trim(),
        format!("[('east', 5000), ('west', 5000)]\n[({size},)]")
    );
    assert!(host_state.join(".ringscan/io.sock").exists());

    // psql's catalog lists the bucket's tables (the daemon lists them: the host's
    // local directory is only its state).
    moto.put(
        "lake",
        "r/other/x.parquet",
        &std::fs::read(local.join("part/region=east/year=2023/p.parquet")).expect("read"),
    );
    std::thread::sleep(Duration::from_millis(1100)); // past the listing's TTL
    let psql = |command: &str| psql_rows(host.port, command);
    if Command::new("psql").arg("--version").output().is_ok() {
        let tables = psql("\\dt");
        assert_eq!(
            tables
                .lines()
                .map(|l| l.split(',').nth(1).unwrap_or(""))
                .collect::<Vec<_>>(),
            ["other", "part"],
            "{tables}"
        );
        let columns = psql("\\d part");
        for column in [
            "id,bigint",
            "amount,double precision",
            "note,text",
            "region,",
            "year,",
        ] {
            assert!(columns.contains(column), "{column}: {columns}");
        }
    }
}

/// The object reader against the server: ranges larger than one request are split,
/// fetched concurrently and put back together; ranges past the end are refused; a
/// rewritten object is not read at its old version.
#[test]
fn object_ranges_are_split_fetched_and_joined_exactly() {
    use ringscan_io_daemon::storage::object::{ObjectRoot, MAX_REQUEST_BYTES};
    use ringscan_io_daemon::storage::ByteRangeSource;
    let Some(python) = python_or_skip("object_ranges_are_split_fetched_and_joined_exactly") else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let moto = Moto::start(python, &dir.path().join("moto.log"), &[]);
    moto.boto("s3.create_bucket(Bucket='blobs')");
    let len = MAX_REQUEST_BYTES * 2 + 12_345;
    let data: Vec<u8> = (0..len)
        .map(|i| (i.wrapping_mul(131) % 251) as u8)
        .collect();
    moto.put("blobs", "a/b.bin", &data);
    let endpoint = moto.endpoint();
    let root = Arc::new(
        ObjectRoot::with_settings(
            "blobs",
            [
                ("aws_endpoint", endpoint.as_str()),
                ("aws_access_key_id", "test"),
                ("aws_secret_access_key", "test"),
                ("aws_region", "us-east-1"),
                ("aws_allow_http", "true"),
            ],
        )
        .expect("client"),
    );
    let object = root.open("s3://blobs/a/b.bin").expect("open");
    assert_eq!(object.len(), len);
    let ranges = [
        0..10,
        100..MAX_REQUEST_BYTES + 200,
        MAX_REQUEST_BYTES + 209..len,
        len..len,
    ];
    let parts = object.read_ranges(&ranges).expect("read");
    assert_eq!(parts.len(), ranges.len());
    for (range, part) in ranges.iter().zip(&parts) {
        let (a, b) = (range.start as usize, range.end as usize);
        assert!(part[..] == data[a..b], "{range:?}");
    }
    assert!(object.read_range(len - 1..len + 1).is_err());
    let before = root.stats();
    let wanted: u64 = ranges.iter().map(|r| r.end - r.start).sum();
    // The two large ranges take two requests each; the HEAD of `open` one more.
    assert_eq!(
        (before.requests, before.bytes_fetched),
        (6, wanted),
        "{before:?}"
    );

    // Rewritten: the old version's reads fail (If-Match), a new open reads the new one.
    moto.put("blobs", "a/b.bin", b"new contents");
    let err = object
        .read_range(0..10)
        .expect_err("the old version is gone");
    assert!(!err.to_string().is_empty());
    let fresh = root.head("s3://blobs/a/b.bin").expect("head");
    assert_eq!(fresh.size, 12);
    let reopened = root.open("s3://blobs/a/b.bin").expect("open");
    assert_eq!(
        &reopened.read_range(0..12).expect("read")[..],
        b"new contents"
    );
    let missing = root.open("s3://blobs/a/none.bin").expect_err("missing");
    assert!(
        missing.to_string().contains("s3://blobs/a/none.bin"),
        "{missing}"
    );
    assert!(missing.to_string().contains("no such object"), "{missing}");
}

/// A loopback HTTP proxy in front of the server that answers some requests itself with
/// `503 Slow Down` and delays others: one request per connection (it closes each).
struct FaultProxy {
    port: u16,
    stop: Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
    counts: Arc<ProxyCounts>,
}

/// What a [`FaultProxy`] saw of the requests held by [`Fault::SlowRanges`].
#[derive(Default)]
struct ProxyCounts {
    /// Requests being held now.
    held: std::sync::atomic::AtomicU64,
    /// Held requests whose client closed the connection before the answer.
    abandoned: std::sync::atomic::AtomicU64,
    /// Held requests forwarded after their delay.
    forwarded: std::sync::atomic::AtomicU64,
    /// Ranged GETs (column data, footers, page indexes) seen, whatever the fault.
    ranged: std::sync::atomic::AtomicU64,
    /// Listings (LIST requests, delimited or not) seen.
    lists: std::sync::atomic::AtomicU64,
}

/// The partitioned table in bucket `lake` under `r/`, reached through a fault proxy,
/// with its local copy: what the fault tests share.
struct ProxiedLake {
    _moto: Moto,
    fault: Arc<std::sync::Mutex<Fault>>,
    proxy: FaultProxy,
    endpoint: String,
    url: &'static str,
    state: PathBuf,
    local_text: String,
}

impl ProxiedLake {
    fn start(python: &Path, dir: &Path) -> Self {
        let moto = Moto::start(python, &dir.join("moto.log"), &[]);
        let local = dir.join("data");
        std::fs::create_dir_all(&local).expect("mkdir");
        write_partitioned(&local);
        moto.boto("s3.create_bucket(Bucket='lake')");
        moto.upload_dir(&local, "lake", "r");
        let fault = Arc::new(std::sync::Mutex::new(Fault::None));
        let proxy = FaultProxy::start(moto.port, Arc::clone(&fault));
        Self {
            endpoint: format!("http://127.0.0.1:{}", proxy.port),
            _moto: moto,
            fault,
            proxy,
            url: "s3://lake/r",
            state: dir.join("state"),
            local_text: local.display().to_string(),
        }
    }

    /// Stops the daemons of the bucket's root and of the local copy when dropped.
    fn daemons(&self) -> Daemons<'_> {
        Daemons {
            roots: vec![
                (self.url.to_owned(), Some(self.state.clone())),
                (self.local_text.clone(), None),
            ],
            endpoint: &self.endpoint,
        }
    }
}

/// What the proxy does to each request.
#[derive(Clone, Copy)]
enum Fault {
    /// Every request passes.
    None,
    /// The first try of every request (its method, target and byte range) gets a 503
    /// after `delay_ms`; its retries pass after `delay_ms`. (Failing every second
    /// request instead made the test depend on requests arriving one at a time: with
    /// several in flight, one of them could draw five 503s in a row.)
    FirstTry { delay_ms: u64 },
    /// Every request gets a 503.
    All,
    /// Ranged GETs (column data, footers) are held `delay_ms` before they are
    /// forwarded, unless their client goes away meanwhile; listings pass at once.
    SlowRanges { delay_ms: u64 },
}

impl FaultProxy {
    fn start(upstream: u16, fault: Arc<std::sync::Mutex<Fault>>) -> Self {
        use std::io::{Read, Write};
        use std::sync::atomic::{AtomicBool, Ordering};
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.set_nonblocking(true).expect("nonblocking");
        let port = listener.local_addr().expect("addr").port();
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = Arc::clone(&stop);
        let seen = Arc::new(std::sync::Mutex::new(std::collections::HashSet::new()));
        let counts = Arc::new(ProxyCounts::default());
        let counted = Arc::clone(&counts);
        let thread = std::thread::spawn(move || {
            while !stopping.load(Ordering::Relaxed) {
                let Ok((mut client, _)) = listener.accept() else {
                    std::thread::sleep(Duration::from_millis(5));
                    continue;
                };
                let (seen, fault) = (Arc::clone(&seen), Arc::clone(&fault));
                let counts = Arc::clone(&counted);
                std::thread::spawn(move || {
                    let _ = client.set_nonblocking(false);
                    let _ = client.set_read_timeout(Some(Duration::from_secs(10)));
                    let mut request = Vec::new();
                    let mut buf = [0u8; 8192];
                    let head_end = loop {
                        if let Some(i) = request.windows(4).position(|w| w == b"\r\n\r\n") {
                            break i + 4;
                        }
                        match client.read(&mut buf) {
                            Ok(0) | Err(_) => return,
                            Ok(n) => request.extend_from_slice(&buf[..n]),
                        }
                    };
                    let head = String::from_utf8_lossy(&request[..head_end]).into_owned();
                    let length: usize = head
                        .lines()
                        .find_map(|l| {
                            let (k, v) = l.split_once(':')?;
                            k.eq_ignore_ascii_case("content-length")
                                .then(|| v.trim().parse().ok())?
                        })
                        .unwrap_or(0);
                    while request.len() < head_end + length {
                        match client.read(&mut buf) {
                            Ok(0) | Err(_) => return,
                            Ok(n) => request.extend_from_slice(&buf[..n]),
                        }
                    }
                    if head.to_ascii_lowercase().contains("\r\nrange:") {
                        counts.ranged.fetch_add(1, Ordering::SeqCst);
                    }
                    if head
                        .lines()
                        .next()
                        .is_some_and(|l| l.contains("list-type=2"))
                    {
                        counts.lists.fetch_add(1, Ordering::SeqCst);
                    }
                    let fault = *fault.lock().unwrap_or_else(|e| e.into_inner());
                    let fail = match fault {
                        Fault::None => false,
                        Fault::FirstTry { delay_ms } => {
                            std::thread::sleep(Duration::from_millis(delay_ms));
                            let key: Vec<&str> = head
                                .lines()
                                .enumerate()
                                .filter(|(i, l)| {
                                    *i == 0 || l.to_ascii_lowercase().starts_with("range:")
                                })
                                .map(|(_, l)| l)
                                .collect();
                            seen.lock()
                                .unwrap_or_else(|e| e.into_inner())
                                .insert(key.join("\n"))
                        }
                        Fault::All => true,
                        Fault::SlowRanges { delay_ms }
                            if head.to_ascii_lowercase().contains("\r\nrange:") =>
                        {
                            // Held, watching the client: a closed connection ends it.
                            counts.held.fetch_add(1, Ordering::SeqCst);
                            let until = Instant::now() + Duration::from_millis(delay_ms);
                            let _ = client.set_nonblocking(true);
                            let mut gone = false;
                            while Instant::now() < until && !gone {
                                std::thread::sleep(Duration::from_millis(5));
                                gone = matches!(client.peek(&mut [0u8; 1]), Ok(0))
                                    || matches!(&client.peek(&mut [0u8; 1]),
                                        Err(e) if e.kind() != std::io::ErrorKind::WouldBlock);
                            }
                            let _ = client.set_nonblocking(false);
                            let which = if gone {
                                &counts.abandoned
                            } else {
                                &counts.forwarded
                            };
                            which.fetch_add(1, Ordering::SeqCst);
                            counts.held.fetch_sub(1, Ordering::SeqCst);
                            if gone {
                                return;
                            }
                            false
                        }
                        Fault::SlowRanges { .. } => false,
                    };
                    if fail {
                        let _ = client.write_all(
                            b"HTTP/1.1 503 Slow Down\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                        );
                        return;
                    }
                    // Forward with `Connection: close`, copy the answer back to its end.
                    let mut lines: Vec<&str> = head[..head.len() - 4]
                        .split("\r\n")
                        .filter(|l| !l.to_ascii_lowercase().starts_with("connection:"))
                        .collect();
                    lines.push("Connection: close");
                    let mut forwarded = lines.join("\r\n").into_bytes();
                    forwarded.extend_from_slice(b"\r\n\r\n");
                    forwarded.extend_from_slice(&request[head_end..]);
                    let Ok(mut server) = TcpStream::connect(("127.0.0.1", upstream)) else {
                        return;
                    };
                    if server.write_all(&forwarded).is_err() {
                        return;
                    }
                    let _ = std::io::copy(&mut server, &mut client);
                });
            }
        });
        Self {
            port,
            stop,
            thread: Some(thread),
            counts,
        }
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// 503s and slow answers are retried with backoff (same answers); a store that fails
/// every request ends the statement with the object and the cause after the retries,
/// and the daemon answers again once the store does.
#[test]
fn server_errors_and_slow_answers_are_retried() {
    let Some(python) = python_or_skip("server_errors_and_slow_answers_are_retried") else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let lake = ProxiedLake::start(python, dir.path());
    let _daemons = lake.daemons();
    let (fault, url) = (&lake.fault, lake.url);
    let (endpoint, state, local_text) = (&lake.endpoint, &lake.state, &lake.local_text);
    let sql = "SELECT region, year, count(*), sum(amount) FROM part WHERE id % 3 = 0 \
               GROUP BY region, year ORDER BY region, year";
    let args = ["query", "--format", "csv", "--no-cache", sql];
    let expected = ringscan(&args, local_text, None, endpoint);
    assert!(expected.status.success(), "{}", stderr(&expected));

    *fault.lock().unwrap() = Fault::FirstTry { delay_ms: 30 };
    let out = ringscan(&args, url, Some(state), endpoint);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), stdout(&expected));

    // Every request failing: the statement fails after the retries, naming the root.
    std::thread::sleep(Duration::from_millis(1200)); // past the listing's TTL
    *fault.lock().unwrap() = Fault::All;
    let started = Instant::now();
    let out = ringscan(&args, url, Some(state), endpoint);
    assert!(!out.status.success(), "{}", stdout(&out));
    let text = stderr(&out);
    assert!(text.contains("s3://lake/r/part"), "{text}");
    assert!(text.contains("503"), "{text}");
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "{:?}",
        started.elapsed()
    );

    *fault.lock().unwrap() = Fault::None;
    let out = ringscan(&args, url, Some(state), endpoint);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), stdout(&expected));
}

/// A scan that is cancelled (its client killed) while its ranged GETs wait on a slow
/// store aborts them: the store sees every held request's connection closed within
/// moments, not answered 8 s later, and the daemon answers the next query. So does a
/// cold daemon whose held requests are the footers it reads to describe the table.
#[test]
fn a_cancelled_scan_aborts_its_requests() {
    use std::sync::atomic::Ordering;
    let Some(python) = python_or_skip("a_cancelled_scan_aborts_its_requests") else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let lake = ProxiedLake::start(python, dir.path());
    let mut daemons = lake.daemons();
    let cold_state = dir.path().join("cold");
    daemons
        .roots
        .push((lake.url.to_owned(), Some(cold_state.clone())));
    let (fault, proxy, url) = (&lake.fault, &lake.proxy, lake.url);
    let (endpoint, state, local_text) = (&lake.endpoint, &lake.state, &lake.local_text);
    // No predicate: no page index to read, only the column chunks once the footers
    // are in the daemon's cache (the statistics-only count puts them there).
    let sql = "SELECT region, sum(amount), count(note) FROM part GROUP BY region ORDER BY region";
    let args = ["query", "--format", "csv", "--no-cache", sql];
    let expected = ringscan(&args, local_text, None, endpoint);
    assert!(expected.status.success(), "{}", stderr(&expected));
    let warm = ringscan(
        &["query", "--no-cache", "SELECT count(*) FROM part"],
        url,
        Some(state),
        endpoint,
    );
    assert!(warm.status.success(), "{}", stderr(&warm));

    // The query on `state` killed while its ranged GETs are held: all of them given up.
    let killed_while_held = |state: &Path| {
        *fault.lock().unwrap() = Fault::SlowRanges { delay_ms: 8000 };
        let mut child = Command::new(env!("CARGO_BIN_EXE_ringscan"))
            .args(args)
            .args(["--data", url, "--state"])
            .arg(state)
            .env("AWS_ENDPOINT_URL", endpoint)
            .env("AWS_ACCESS_KEY_ID", "test")
            .env("AWS_SECRET_ACCESS_KEY", "test")
            .env("AWS_REGION", "us-east-1")
            .env("AWS_ALLOW_HTTP", "true")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn ringscan");
        let deadline = Instant::now() + Duration::from_secs(20);
        while proxy.counts.held.load(Ordering::SeqCst) == 0 {
            assert!(Instant::now() < deadline, "no ranged GET reached the proxy");
            std::thread::sleep(Duration::from_millis(10));
        }
        std::thread::sleep(Duration::from_millis(200)); // the scan's other requests
        let held = proxy.counts.held.load(Ordering::SeqCst);
        let abandoned = proxy.counts.abandoned.load(Ordering::SeqCst);
        child.kill().expect("kill");
        let _ = child.wait();
        let killed = Instant::now();
        while proxy.counts.held.load(Ordering::SeqCst) > 0 {
            assert!(
                killed.elapsed() < Duration::from_secs(4),
                "requests still held {:?} after the client was killed ({} of {held})",
                killed.elapsed(),
                proxy.counts.held.load(Ordering::SeqCst),
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(proxy.counts.forwarded.load(Ordering::SeqCst), 0);
        assert!(proxy.counts.abandoned.load(Ordering::SeqCst) - abandoned >= held);
        *fault.lock().unwrap() = Fault::None;
    };
    killed_while_held(state);
    killed_while_held(&cold_state);

    for state in [state, &cold_state] {
        let out = ringscan(&args, url, Some(state), endpoint);
        assert!(out.status.success(), "{}", stderr(&out));
        assert_eq!(stdout(&out), stdout(&expected));
    }
}

/// `--cache-dir`: a second host (its own state, a cold daemon) over the same bucket and
/// cache directory answers the same without one ranged GET; a damaged entry is fetched
/// again, never served; a rewritten object is read at its new version.
#[test]
fn a_second_host_sharing_the_cache_dir_fetches_no_ranges() {
    use std::sync::atomic::Ordering;
    let Some(python) = python_or_skip("a_second_host_sharing_the_cache_dir_fetches_no_ranges")
    else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let lake = ProxiedLake::start(python, dir.path());
    let (url, endpoint, local_text) = (lake.url, &lake.endpoint, &lake.local_text);
    let hosts: Vec<PathBuf> = (0..4)
        .map(|i| dir.path().join(format!("host{i}")))
        .collect();
    let mut roots: Vec<(String, Option<PathBuf>)> = hosts
        .iter()
        .map(|h| (url.to_owned(), Some(h.clone())))
        .collect();
    roots.push((local_text.clone(), None));
    let _daemons = Daemons { roots, endpoint };
    let cache = dir.path().join("ranges");
    let cache_text = cache.display().to_string();
    let stats = dir.path().join("stats.json");
    let stats_text = stats.display().to_string();
    let sql = "SELECT region, year, count(*), sum(amount), min(note), max(id) FROM part \
               GROUP BY region, year ORDER BY region, year";
    let args = [
        "query",
        "--format",
        "csv",
        "--no-cache",
        "--cache-dir",
        &cache_text,
        "--stats-json",
        &stats_text,
        sql,
    ];
    let local = |sql: &str| {
        let out = ringscan(
            &["query", "--format", "csv", "--no-cache", sql],
            local_text,
            None,
            endpoint,
        );
        assert!(out.status.success(), "{}", stderr(&out));
        stdout(&out)
    };
    // The ranged GETs one query on `host` makes, its answer checked.
    let run = |host: &Path, expected: &str| {
        let before = lake.proxy.counts.ranged.load(Ordering::SeqCst);
        let out = ringscan(&args, url, Some(host), endpoint);
        assert!(out.status.success(), "{}", stderr(&out));
        assert_eq!(stdout(&out), expected);
        // The daemon keeps what it fetched after answering: wait for its writes.
        let mut last = Vec::new();
        loop {
            std::thread::sleep(Duration::from_millis(100));
            let now = entries(&cache);
            if now == last {
                break;
            }
            last = now;
        }
        lake.proxy.counts.ranged.load(Ordering::SeqCst) - before
    };
    // What `--stats-json` says the last query's scans fetched and found in the cache.
    let scan_bytes = || {
        let text = std::fs::read_to_string(&stats).expect("stats");
        let json: serde_json::Value = serde_json::from_str(&text).expect("json");
        let scan = &json["scan"];
        let count = |k: &str| scan[k].as_u64().unwrap_or_else(|| panic!("{k}: {scan}"));
        (
            count("store_bytes_fetched"),
            count("store_cache_hit_bytes"),
            count("bytes_read"),
        )
    };
    let expected = local(sql);
    let (lists, started) = (
        lake.proxy.counts.lists.load(Ordering::SeqCst),
        Instant::now(),
    );
    assert!(run(&hosts[0], &expected) > 0);
    // One listing per --list-ttl (1 s): the describe's, which the statistics request
    // and the scan reuse (the statistics request listed again: two in ~0.5 s).
    let lists = lake.proxy.counts.lists.load(Ordering::SeqCst) - lists;
    let periods = started.elapsed().as_millis() / 1000 + 1;
    assert!(
        u128::from(lists) <= periods,
        "{lists} listings in {:?}",
        started.elapsed()
    );
    assert_eq!(run(&hosts[1], &expected), 0, "a second host fetched ranges");
    let (fetched, from_cache, read) = scan_bytes();
    assert_eq!(fetched, 0);
    assert!(
        from_cache >= read && read > 0,
        "{from_cache} from the cache, {read} read"
    );
    let kept = entries(&cache);
    assert!(!kept.is_empty());

    // A truncated entry is not served: its range is fetched again (and kept again).
    let (path, len) = &kept[0];
    std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .and_then(|f| f.set_len(len - 1))
        .expect("truncate");
    assert!(run(&hosts[2], &expected) > 0, "a damaged entry was served");
    assert_eq!(run(&hosts[3], &expected), 0);

    // An object rewritten in the bucket is read at its new version.
    let key = "part/region=west/year=2024/p.parquet";
    let other = std::fs::read(Path::new(local_text).join("part/region=east/year=2023/p.parquet"))
        .expect("read");
    std::fs::write(Path::new(local_text).join(key), &other).expect("write");
    lake._moto.put("lake", &format!("r/{key}"), &other);
    std::thread::sleep(Duration::from_millis(1200)); // past the listing's TTL
    let rewritten = local(sql);
    assert_ne!(rewritten, expected);
    assert!(run(&hosts[1], &rewritten) > 0);
}

/// The entries below a range cache directory (not its temporary files), with their sizes.
fn entries(cache: &Path) -> Vec<(PathBuf, u64)> {
    let mut found = Vec::new();
    for object in std::fs::read_dir(cache).into_iter().flatten().flatten() {
        if object.file_name() == "tmp" {
            continue;
        }
        for file in std::fs::read_dir(object.path())
            .into_iter()
            .flatten()
            .flatten()
        {
            let len = file.metadata().map_or(0, |m| m.len());
            found.push((file.path(), len));
        }
    }
    found.sort();
    found
}

/// Credentials and region from an AWS profile: `~/.aws/credentials` and `~/.aws/config`
/// under a temporary HOME, or the files named by `AWS_SHARED_CREDENTIALS_FILE`; a
/// profile that does not exist is an error naming it and the files. The endpoint stays
/// in the environment (a profile that went unread must not send requests to AWS), and
/// the instance-metadata endpoint, where a client without keys turns, is a closed port
/// on loopback: a query that answers had its keys from the profile.
#[test]
fn credentials_and_region_come_from_an_aws_profile() {
    let Some((_, dir, moto, local)) =
        partitioned_lake_or_skip("credentials_and_region_come_from_an_aws_profile")
    else {
        return;
    };
    let url = "s3://lake/r";
    let endpoint = moto.endpoint();
    let home = dir.path().join("home");
    std::fs::create_dir_all(home.join(".aws")).expect("mkdir");
    let credentials = home.join(".aws/credentials");
    let config = home.join(".aws/config");
    std::fs::write(
        &credentials,
        "[default]\naws_access_key_id = test\naws_secret_access_key = test\n",
    )
    .expect("write");
    std::fs::write(
        &config,
        "[default]\nregion = us-east-1\n\n[profile lake]\nregion = us-east-1\n",
    )
    .expect("write");
    let other = dir.path().join("other-credentials");
    std::fs::write(
        &other,
        "# named by AWS_SHARED_CREDENTIALS_FILE\n[lake]\naws_access_key_id = test\n\
         aws_secret_access_key = test\naws_session_token = t\n",
    )
    .expect("write");
    let empty_home = dir.path().join("empty-home");
    std::fs::create_dir_all(&empty_home).expect("mkdir");

    let states: Vec<PathBuf> = (0..4)
        .map(|i| dir.path().join(format!("state-{i}")))
        .collect();
    let _daemons = Daemons {
        roots: states
            .iter()
            .map(|s| (url.to_owned(), Some(s.clone())))
            .collect(),
        endpoint: &endpoint,
    };
    let sql = "SELECT region, year, count(*), sum(amount) FROM part GROUP BY region, year ORDER BY region, year";
    let run = |state: &Path, home: &Path, vars: &[(&str, &str)]| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_ringscan"));
        for (name, _) in std::env::vars_os() {
            if name.to_string_lossy().starts_with("AWS_") {
                command.env_remove(name);
            }
        }
        command
            .args(["query", "--format", "csv", sql, "--data", url, "--state"])
            .arg(state)
            .env("HOME", home)
            .env("AWS_ENDPOINT_URL", &endpoint)
            .env("AWS_ALLOW_HTTP", "true")
            .env("AWS_METADATA_ENDPOINT", "http://127.0.0.1:1")
            .envs(vars.iter().copied())
            .stdin(Stdio::null())
            .output()
            .expect("spawn ringscan")
    };
    let expected = ringscan(
        &["query", "--format", "csv", sql],
        &local.display().to_string(),
        None,
        &endpoint,
    );
    assert!(expected.status.success(), "{}", stderr(&expected));

    // The default profile, from the home directory.
    let out = run(&states[0], &home, &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), stdout(&expected));

    // A named profile from the file AWS_SHARED_CREDENTIALS_FILE names; its region from
    // ~/.aws/config.
    let other_text = other.display().to_string();
    let out = run(
        &states[1],
        &home,
        &[
            ("AWS_PROFILE", "lake"),
            ("AWS_SHARED_CREDENTIALS_FILE", &other_text),
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), stdout(&expected));

    // A profile neither file has.
    let out = run(&states[2], &home, &[("AWS_PROFILE", "nope")]);
    assert!(!out.status.success(), "{}", stdout(&out));
    let text = stderr(&out);
    let wanted = format!(
        "AWS_PROFILE=nope: no profile [nope] in {} (read) nor [profile nope] in {} (read)",
        credentials.display(),
        config.display()
    );
    assert!(text.contains(&wanted), "{text}");

    // No profile and no keys: the client asks the metadata endpoint, which is closed,
    // so the answers above came from the profiles.
    let out = run(&states[3], &empty_home, &[("AWS_REGION", "us-east-1")]);
    assert!(!out.status.success(), "{}", stdout(&out));
    let text = stderr(&out);
    assert!(
        text.contains("s3://lake/r") && text.contains("127.0.0.1:1/latest/api/token"),
        "{text}"
    );
}

/// `gs://` roots read through `object_store`'s Google Cloud Storage client: pointed at
/// moto by `GOOGLE_BASE_URL`, whose S3 API answers the XML requests GCS's client makes
/// (path-style GET with a range, `list-type=2` listing), unsigned
/// (`GOOGLE_SKIP_SIGNATURE`) on a bucket whose policy lets anyone read. The same
/// queries answer as over the local copy. An `az://` root without
/// `AZURE_STORAGE_ACCOUNT_NAME` (nor the emulator's switch) has no client to make, and
/// the message says so for the container (no request is sent); Azurite serves the
/// `az://` tests below.
#[test]
fn gs_roots_read_through_the_gcs_client_and_az_roots_name_what_is_missing() {
    let Some(python) =
        python_or_skip("gs_roots_read_through_the_gcs_client_and_az_roots_name_what_is_missing")
    else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let moto = Moto::start(python, &dir.path().join("moto.log"), &[]);
    let local = dir.path().join("data");
    std::fs::create_dir_all(&local).expect("mkdir");
    write_partitioned(&local);
    moto.boto(
        "import json\n\
         s3.create_bucket(Bucket='lake')\n\
         s3.put_bucket_policy(Bucket='lake', Policy=json.dumps({'Version': '2012-10-17', \
         'Statement': [{'Effect': 'Allow', 'Principal': '*', \
         'Action': ['s3:GetObject', 's3:ListBucket'], \
         'Resource': ['arn:aws:s3:::lake', 'arn:aws:s3:::lake/*']}]}))",
    );
    moto.upload_dir(&local, "lake", "r");
    let endpoint = moto.endpoint();
    let url = "gs://lake/r";
    let state = dir.path().join("state-gs");
    let az_state = dir.path().join("state-az");
    let gcs = [
        ("GOOGLE_BASE_URL", endpoint.as_str()),
        ("GOOGLE_SKIP_SIGNATURE", "true"),
        ("GOOGLE_ALLOW_HTTP", "true"),
    ];
    let run = |data: &str, state: &Path, sql: &str| {
        ringscan_env(&["query", "--format", "csv", sql], data, Some(state), &gcs)
    };
    let _stop = OnDrop(|| {
        for (data, state) in [(url, &state), ("az://container/r", &az_state)] {
            let _ = ringscan_env(&["daemon", "stop"], data, Some(state), &[]);
        }
    });

    let local_text = local.display().to_string();
    for sql in [
        "SELECT region, year, count(*), sum(amount) FROM part GROUP BY region, year ORDER BY region, year",
        "SELECT id, amount, note FROM part WHERE year = 2024 AND id BETWEEN 30100 AND 30110 ORDER BY id",
        "SELECT count(*) FROM 'gs://lake/r/part/region=west/**/*.parquet' WHERE note = 'n3'",
    ] {
        let out = run(url, &state, sql);
        assert!(out.status.success(), "{sql}: {}", stderr(&out));
        let local_sql = sql.replace("gs://lake/r/", "");
        let here = ringscan(
            &["query", "--format", "csv", &local_sql],
            &local_text,
            None,
            &endpoint,
        );
        assert!(here.status.success(), "{local_sql}: {}", stderr(&here));
        assert_eq!(stdout(&out), stdout(&here), "{sql}");
        assert!(stdout(&out).lines().count() > 1, "{sql}: no rows");
    }
    // A glob that matches nothing in the bucket says so.
    let out = run(
        url,
        &state,
        "SELECT count(*) FROM 'gs://lake/r/nothing/*.parquet'",
    );
    assert!(!out.status.success(), "{}", stdout(&out));
    assert!(
        stderr(&out).contains("\"r/nothing/*.parquet\" matches no file"),
        "{}",
        stderr(&out)
    );

    let out = run("az://container/r", &az_state, "SELECT count(*) FROM part");
    assert!(!out.status.success(), "{}", stdout(&out));
    let text = stderr(&out);
    assert!(
        text.contains("cannot configure the object-store client for az://container"),
        "{text}"
    );
}

/// Runs `script` with the Azure SDK (`azure-storage-blob`, from the interop venv)
/// against `azurite` (`svc`: its `BlobServiceClient`).
fn blob_script(python: &Path, azurite: &Azurite, script: &str) {
    let prelude = format!(
        "import os\n\
         from azure.storage.blob import BlobServiceClient\n\
         svc = BlobServiceClient.from_connection_string({:?})\n",
        azurite.connection_string()
    );
    run_script(python, "azure-storage-blob", &format!("{prelude}{script}"));
}

/// Runs the Python `script` (its client library: `what`) with the venv's `python`; a
/// failure fails the test with its output.
fn run_script(python: &Path, what: &str, script: &str) {
    let out = Command::new(python)
        .args(["-c", script])
        .env_remove("AWS_CA_BUNDLE")
        .stdin(Stdio::null())
        .output()
        .expect("python");
    assert!(
        out.status.success(),
        "{what} script failed: {}\n{script}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `ringscan <args> --data <data> [--state <state>]` with `env` and no other `AWS_*`,
/// `GOOGLE_*`, `AZURE_*` or `AZURITE_*` variable inherited.
fn ringscan_env(args: &[&str], data: &str, state: Option<&Path>, env: &[(&str, &str)]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_ringscan"));
    for (name, _) in std::env::vars_os() {
        let text = name.to_string_lossy();
        if ["AWS_", "GOOGLE_", "AZURE_", "AZURITE_"]
            .iter()
            .any(|p| text.starts_with(p))
        {
            command.env_remove(name);
        }
    }
    command
        .args(args)
        .arg("--data")
        .arg(data)
        .envs(env.iter().copied())
        .stdin(Stdio::null());
    if let Some(state) = state {
        command.arg("--state").arg(state);
    }
    command.output().expect("spawn ringscan")
}

/// Runs its closure when dropped (stops the daemons a test started, on every path).
struct OnDrop<F: FnMut()>(F);

impl<F: FnMut()> Drop for OnDrop<F> {
    fn drop(&mut self) {
        (self.0)();
    }
}

/// `az://` roots read through `object_store`'s Azure Blob Storage client from Azurite,
/// Microsoft's emulator, on loopback: configured the two ways a user does (the
/// emulator's switch, `AZURE_STORAGE_USE_EMULATOR`; an account's name, key and endpoint),
/// the same queries answer as over the local copy, URLs in FROM included, and the host
/// serves the container to psql. A missing container, a wrong key and an object that is
/// not Parquet each fail with a message naming the container or object and the cause;
/// the daemon serves on.
#[test]
fn az_roots_read_from_azurite_answer_as_the_local_copy() {
    const TEST: &str = "az_roots_read_from_azurite_answer_as_the_local_copy";
    let Some(python) = python_or_skip(TEST) else {
        return;
    };
    let Some(azurite_blob) = azurite_or_skip(TEST) else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let azurite = Azurite::start(azurite_blob, &dir.path().join("azurite.log"));
    let local = dir.path().join("data");
    make_data(&local);
    let good = std::fs::read(local.join("part/region=east/year=2023/p.parquet")).expect("read");
    let junk = dir.path().join("junk.bin");
    std::fs::write(&junk, b"this is not a parquet file at all").expect("write");
    let cut = dir.path().join("cut.bin");
    std::fs::write(&cut, &good[..good.len() / 2]).expect("write");
    blob_script(
        python,
        &azurite,
        &format!(
            "c = svc.create_container('lake')\n\
             def put(path, name):\n\
             \x20   with open(path, 'rb') as f: c.upload_blob(name, f, overwrite=True)\n\
             root = {root:?}\n\
             for d, dirs, files in os.walk(root):\n\
             \x20   dirs[:] = [x for x in dirs if not x.startswith('.')]\n\
             \x20   for f in files:\n\
             \x20       p = os.path.join(d, f)\n\
             \x20       put(p, 'root/v1/' + os.path.relpath(p, root))\n\
             put({good:?}, 'bad/part/x.parquet')\n\
             put({junk:?}, 'bad/junk/x.parquet')\n\
             put({cut:?}, 'bad/cut/x.parquet')\n",
            root = local.display().to_string(),
            good = local
                .join("part/region=east/year=2023/p.parquet")
                .display()
                .to_string(),
            junk = junk.display().to_string(),
            cut = cut.display().to_string(),
        ),
    );
    let blob_url = azurite.url();
    let account_endpoint = azurite.account_endpoint();
    let emulator: &[(&str, &str)] = &[
        ("AZURE_STORAGE_USE_EMULATOR", "true"),
        ("AZURITE_BLOB_STORAGE_URL", &blob_url),
    ];
    let account = |key: &'static str| {
        [
            ("AZURE_STORAGE_ACCOUNT_NAME", common::azurite::ACCOUNT),
            ("AZURE_STORAGE_ACCOUNT_KEY", key),
            ("AZURE_STORAGE_ENDPOINT", account_endpoint.as_str()),
            ("AZURE_ALLOW_HTTP", "true"),
        ]
    };
    let by_account = account(common::azurite::ACCOUNT_KEY);
    // A well-formed key that is not the account's.
    let wrong_key = account("d3Jvbmcga2V5IHdyb25nIGtleSB3cm9uZyBrZXkgd3Jvbmcga2V5IQ==");
    let url = "az://lake/root/v1";
    let states: Vec<PathBuf> = (0..6)
        .map(|i| dir.path().join(format!("state-{i}")))
        .collect();
    let roots: Vec<(&str, &Path)> = vec![
        (url, &states[0]),
        (url, &states[1]),
        ("az://nolake/r", &states[2]),
        (url, &states[3]),
        ("az://lake/bad", &states[4]),
        (url, &states[5]),
    ];
    let local_text = local.display().to_string();
    let _stop = OnDrop(|| {
        for (root, state) in &roots {
            let _ = ringscan_env(&["daemon", "stop"], root, Some(state), emulator);
        }
        let _ = ringscan_env(&["daemon", "stop"], &local_text, None, &[]);
    });
    let csv = |sql: &str, data: &str, state: Option<&Path>, env: &[(&str, &str)]| {
        ringscan_env(&["query", "--format", "csv", sql], data, state, env)
    };

    for (how, env, state) in [
        ("emulator", emulator, &states[0]),
        ("account", &by_account[..], &states[1]),
    ] {
        let mut queries = QUERIES.to_vec();
        let by_url = "SELECT region, year, count(*) FROM 'az://lake/root/v1/part/**/*.parquet' \
                      WHERE id % 2 = 0 GROUP BY region, year ORDER BY region, year";
        queries.push(by_url);
        for sql in queries {
            let remote = csv(sql, url, Some(state), env);
            let here = csv(
                &sql.replace("az://lake/root/v1/", ""),
                &local_text,
                None,
                &[],
            );
            assert!(here.status.success(), "{sql} (local): {}", stderr(&here));
            assert!(
                remote.status.success(),
                "{sql} ({how}): {}",
                stderr(&remote)
            );
            assert_eq!(stdout(&remote), stdout(&here), "{sql} ({how})");
            assert!(stdout(&remote).lines().count() > 1, "{sql}: no rows");
        }
    }
    // Pruning and the store's counters, as over S3.
    let selective = "SELECT id, amount FROM part WHERE year = 2024 AND id BETWEEN 30100 AND 30110";
    let stats = ringscan_env(
        &["query", "--stats", selective],
        url,
        Some(&states[0]),
        emulator,
    );
    assert!(stats.status.success(), "{}", stderr(&stats));
    let text = stderr(&stats);
    assert!(text.contains("pruned"), "{text}");
    assert!(text.contains("object store: "), "{text}");

    // A container that does not exist.
    let out = csv(
        "SELECT count(*) FROM part",
        "az://nolake/r",
        Some(&states[2]),
        emulator,
    );
    assert!(!out.status.success(), "{}", stdout(&out));
    let text = stderr(&out);
    assert!(text.contains("az://nolake/r/part"), "{text}");
    assert!(
        text.contains("container \"nolake\" does not exist"),
        "{text}"
    );
    // A key the account does not have: Azurite checks the request's signature.
    let out = csv(
        "SELECT count(*) FROM part",
        url,
        Some(&states[3]),
        &wrong_key,
    );
    assert!(!out.status.success(), "{}", stdout(&out));
    let text = stderr(&out);
    assert!(text.contains("az://lake/root/v1/part"), "{text}");
    assert!(text.contains("access denied"), "{text}");
    assert!(text.contains("AZURE_STORAGE_ACCOUNT_KEY"), "{text}");
    // Objects that are not Parquet, then the same daemon answering.
    for table in ["junk", "cut"] {
        let out = csv(
            &format!("SELECT * FROM {table}"),
            "az://lake/bad",
            Some(&states[4]),
            emulator,
        );
        let text = stderr(&out);
        assert!(!out.status.success(), "{table}: {}", stdout(&out));
        assert!(
            text.contains(&format!("az://lake/bad/{table}/x.parquet")),
            "{table}: {text}"
        );
        assert!(
            text.contains("corrupt or truncated Parquet file"),
            "{table}: {text}"
        );
        assert!(!text.contains("panicked"), "{table}: {text}");
        let again = csv(
            "SELECT count(*) FROM part",
            "az://lake/bad",
            Some(&states[4]),
            emulator,
        );
        assert!(again.status.success(), "after {table}: {}", stderr(&again));
        assert_eq!(stdout(&again), "count(*)\n5000\n");
    }

    // The host over the container, asked by psql.
    let state = states[5].display().to_string();
    let host = common::serve::Host::start_with_env(
        "127.0.0.1:0",
        Path::new(url),
        &dir.path().join("host.log"),
        &["--state", &state],
        emulator,
    );
    let sql = "SELECT symbol, count(*), sum(volume) FROM ohlcv GROUP BY symbol ORDER BY symbol";
    let served = psql_rows(host.port, sql);
    let here = csv(sql, &local_text, None, &[]);
    assert!(here.status.success(), "{}", stderr(&here));
    // psql's unaligned rows against the CLI's CSV, its header dropped.
    let here = stdout(&here);
    let expected: Vec<&str> = here.lines().skip(1).collect();
    assert_eq!(served.lines().collect::<Vec<_>>(), expected);
    assert!(expected.len() > 1);
}
