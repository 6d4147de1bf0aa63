//! Helpers shared by the root integration tests.
#![allow(dead_code, reason = "each test binary uses a different subset")]

pub(crate) mod azurite;
pub(crate) mod cli;
pub(crate) mod python;
pub(crate) mod serve;

use std::path::Path;
use std::time::{Duration, Instant};

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
