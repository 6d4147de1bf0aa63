//! The parquet-testing `bad_data` corpus (and the encrypted files) through one daemon:
//! each file is an error naming it (or rows), and the daemon serves a good scan after.
//!
//! Needs `PARQUET_TEST_DATA` (…/parquet-testing/data); skipped without it unless
//! `RINGSCAN_REQUIRE_TEST_DATA=1`.

mod daemon_support;

use std::path::PathBuf;

use daemon_support::{scan_via, write_file, Daemon};
use ringscan_ipc::msg::{ScanRequest, ScanSource};

fn corpus() -> Option<PathBuf> {
    match std::env::var_os("PARQUET_TEST_DATA") {
        Some(dir) => Some(PathBuf::from(dir)),
        None if std::env::var("RINGSCAN_REQUIRE_TEST_DATA").as_deref() == Ok("1") => {
            panic!("PARQUET_TEST_DATA is unset and RINGSCAN_REQUIRE_TEST_DATA=1")
        }
        None => {
            println!("skipped: PARQUET_TEST_DATA is unset (the bad_data corpus is not available)");
            None
        }
    }
}

fn sorted_files(dir: &std::path::Path, suffix: &str) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(suffix))
        .collect();
    files.sort();
    files
}

#[test]
fn bad_and_encrypted_files_are_errors_and_the_daemon_survives() {
    bad_and_encrypted_files(&[]);
}

/// The same corpus read through memory maps (`--io mmap`).
#[test]
fn bad_and_encrypted_files_through_memory_maps() {
    bad_and_encrypted_files(&["--io", "mmap"]);
}

fn bad_and_encrypted_files(daemon_args: &[&str]) {
    let Some(corpus) = corpus() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    write_file(&data.join("good/a.parquet"), 0, 100);
    // (table, file name, must mention encryption)
    let mut cases = Vec::new();
    let bad = sorted_files(&corpus.join("../bad_data"), ".parquet");
    let encrypted = sorted_files(&corpus, ".parquet.encrypted");
    assert!(
        !bad.is_empty(),
        "no bad_data files under {}",
        corpus.display()
    );
    for (i, path) in bad.iter().chain(&encrypted).enumerate() {
        let is_encrypted = path.to_string_lossy().ends_with(".encrypted");
        let name = path
            .file_name()
            .unwrap()
            .to_string_lossy()
            .trim_end_matches(".encrypted")
            .to_owned();
        let table = format!("case{i}");
        std::fs::create_dir_all(data.join(&table)).unwrap();
        std::fs::copy(path, data.join(&table).join(&name)).unwrap();
        cases.push((table, name, is_encrypted));
    }
    let daemon = Daemon::start(&data, daemon_args);
    let client = daemon.client();
    for (table, name, is_encrypted) in &cases {
        let request = ScanRequest::new(ScanSource::Table {
            name: table.clone(),
        });
        match scan_via(&client, &request) {
            Ok((batches, _)) => {
                assert!(!is_encrypted, "{name}: an encrypted file was read");
                let rows: usize = batches.iter().map(|b| b.num_rows()).sum();
                println!("{name}: ok, {rows} rows");
            }
            Err(e) => {
                let text = e.to_string();
                println!("{name}: {text}");
                assert!(text.contains(name.as_str()), "{name}: {text}");
                if *is_encrypted {
                    assert!(
                        text.contains("encrypted Parquet is not supported"),
                        "{text}"
                    );
                }
            }
        }
        client_ping(&daemon);
    }
    let (batches, _) = scan_via(
        &client,
        &ScanRequest::new(ScanSource::Table {
            name: "good".into(),
        }),
    )
    .unwrap();
    assert_eq!(batches.iter().map(|b| b.num_rows()).sum::<usize>(), 100);
}

fn client_ping(daemon: &Daemon) {
    daemon.client().ping().expect("the daemon is alive");
}
