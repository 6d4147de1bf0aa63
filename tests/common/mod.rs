//! Helpers shared by the root integration tests.
#![allow(dead_code, reason = "each test binary uses a different subset")]

pub(crate) mod azurite;
pub(crate) mod cli;
pub(crate) mod python;
pub(crate) mod serve;

use std::path::Path;
use std::time::{Duration, Instant};

/// What an interop installer gave (`found`), or `None` after saying why `test` is
/// skipped without it (`needs`: what it needs, in words); under
/// `RINGSCAN_REQUIRE_INTEROP=1` (CI) a skip is a failure instead.
pub(crate) fn or_skip<T>(test: &str, needs: &str, found: Result<T, &str>) -> Option<T> {
    match found {
        Ok(found) => Some(found),
        Err(why) => {
            assert!(
                std::env::var("RINGSCAN_REQUIRE_INTEROP").as_deref() != Ok("1"),
                "test {test} needs {needs} and RINGSCAN_REQUIRE_INTEROP=1 is set: {why}"
            );
            eprintln!("SKIPPED {test}: {why}");
            None
        }
    }
}

/// Waits (at most 60 s) until `what`, just started with its output in `log`, accepts
/// connections on 127.0.0.1:`port`.
pub(crate) fn wait_listening(what: &str, port: u16, log: &Path) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            Instant::now() < deadline,
            "{what} did not listen on port {port} within 60 s: {}",
            std::fs::read_to_string(log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}
