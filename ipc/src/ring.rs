//! Pieces shared by the producer and the consumer: names and options (waiting is
//! [`wait`](crate::wait)).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::error::RingError;
use crate::layout::{MAX_CAPACITY_BYTES, MIN_CAPACITY_BYTES};
use crate::sys;

/// How long one blocking wait sleeps before it wakes to check that the peer is alive.
/// A dead peer is therefore reported within about this long (the issue asks for < 1 s).
pub const LIVENESS_INTERVAL: Duration = Duration::from_millis(100);

/// Longest error text an error record carries; longer texts are truncated.
pub const MAX_ERROR_TEXT_BYTES: usize = 64 * 1024;

/// Longest POSIX shared-memory name (NAME_MAX, leading slash included).
const MAX_NAME_BYTES: usize = 255;

/// Options for [`Producer::create_with`](crate::Producer::create_with).
#[derive(Debug, Clone)]
pub struct RingOptions {
    capacity_bytes: usize,
    attach_timeout: Duration,
}

impl RingOptions {
    /// A ring with a data area of `capacity_bytes` (a multiple of 4096 between
    /// [`MIN_CAPACITY_BYTES`] and [`MAX_CAPACITY_BYTES`]).
    pub fn new(capacity_bytes: usize) -> Self {
        Self {
            capacity_bytes,
            attach_timeout: Duration::from_secs(10),
        }
    }

    /// How long the producer waits for a consumer to attach before it gives up
    /// (default 10 s). Until then the name exists in `/dev/shm`.
    pub fn with_attach_timeout(mut self, timeout: Duration) -> Self {
        self.attach_timeout = timeout;
        self
    }

    /// The data area size.
    pub fn capacity_bytes(&self) -> usize {
        self.capacity_bytes
    }

    /// The attach timeout.
    pub fn attach_timeout(&self) -> Duration {
        self.attach_timeout
    }

    pub(crate) fn validate(&self) -> Result<(), RingError> {
        let reason = if self.capacity_bytes < MIN_CAPACITY_BYTES {
            "smaller than 4096 bytes"
        } else if self.capacity_bytes > MAX_CAPACITY_BYTES {
            "larger than 64 GiB"
        } else if !self.capacity_bytes.is_multiple_of(4096) {
            "not a multiple of 4096 bytes"
        } else {
            return Ok(());
        };
        Err(RingError::InvalidCapacity {
            capacity_bytes: self.capacity_bytes,
            reason,
        })
    }
}

/// Checks that `name` is a portable POSIX shared-memory name: `/` then 1..=254 bytes
/// without `/` or NUL.
pub(crate) fn validate_name(name: &str) -> Result<(), RingError> {
    let reason = if !name.starts_with('/') {
        "must start with '/'"
    } else if name.len() < 2 || name.len() > MAX_NAME_BYTES {
        "must be 2 to 255 bytes long"
    } else if name[1..].contains(['/', '\0']) {
        "must not contain '/' or NUL after the leading '/'"
    } else {
        return Ok(());
    };
    Err(RingError::InvalidName {
        name: name.to_owned(),
        reason,
    })
}

/// Prefix of the names of the rings the IO daemon makes for scans: a ring is
/// `/ringscan-<daemon pid>-…`, so whoever outlives a dead daemon can find its rings
/// ([`remove_rings_of`](crate::remove_rings_of)).
pub const RING_PREFIX: &str = "ringscan";

/// A fresh ring name, unique on this machine: `/<prefix>-<pid>-<ns>-<counter>`.
pub fn unique_name(prefix: &str) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    format!(
        "/{prefix}-{}-{}-{n}",
        std::process::id(),
        sys::monotonic_ns()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_validated() {
        assert!(validate_name("/ringscan-1").is_ok());
        for bad in ["", "/", "x", "/a/b", "/a\0b"] {
            assert!(validate_name(bad).is_err(), "{bad:?}");
        }
        assert!(validate_name(&format!("/{}", "x".repeat(255))).is_err());
        let n = unique_name("t");
        assert!(validate_name(&n).is_ok());
        assert_ne!(n, unique_name("t"));
    }

    #[test]
    fn capacities_are_validated() {
        assert!(RingOptions::new(4096).validate().is_ok());
        for bad in [0, 4095, 5000, MAX_CAPACITY_BYTES + 4096] {
            assert!(RingOptions::new(bad).validate().is_err(), "{bad}");
        }
    }
}
