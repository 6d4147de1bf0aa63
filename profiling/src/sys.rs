//! The crate's only unsafe code: `getrusage(2)` for CPU time (and peak RSS where
//! /proc/self/status gives none).
//!
//! perf-event does its own `perf_event_open`/`ioctl` unsafety; everything here is one
//! plain libc call with a safe wrapper above it.

use std::time::Duration;

/// Resource usage of the whole process (all threads, live and exited).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct ProcessUsage {
    /// User-mode CPU time.
    pub(crate) user_cpu: Duration,
    /// Kernel-mode CPU time.
    pub(crate) system_cpu: Duration,
    /// Peak resident set size.
    pub(crate) peak_rss_bytes: u64,
}

/// `getrusage(RUSAGE_SELF)`; zeros if the call fails (it cannot with these arguments).
pub(crate) fn process_usage() -> ProcessUsage {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: `usage` points to writable memory the size of `struct rusage`, which is all
    // getrusage writes; RUSAGE_SELF is a valid `who`. A zeroed rusage is a valid value
    // of the type (all integer fields), so `assume_init` is sound even if the call fails.
    let (rc, usage) = unsafe {
        let rc = libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr());
        (rc, usage.assume_init())
    };
    if rc != 0 {
        return ProcessUsage::default();
    }
    ProcessUsage {
        user_cpu: timeval(usage.ru_utime),
        system_cpu: timeval(usage.ru_stime),
        // Linux reports ru_maxrss in KiB.
        peak_rss_bytes: own_peak_rss_bytes().unwrap_or_else(|| {
            u64::try_from(usage.ru_maxrss)
                .unwrap_or(0)
                .saturating_mul(1024)
        }),
    }
}

/// `VmHWM` of /proc/self/status: the peak of this program's own memory. `ru_maxrss`
/// is not that on Linux: `execve` carries over the peak of the process image it
/// replaced, so a program started by a parent holding 200 MiB reports at least what
/// the parent's copy held between `fork` and `exec` (measured: 218 MiB for a query
/// whose own peak was 16 MiB).
fn own_peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib.saturating_mul(1024))
}

fn timeval(tv: libc::timeval) -> Duration {
    let secs = u64::try_from(tv.tv_sec).unwrap_or(0);
    let micros = u32::try_from(tv.tv_usec).unwrap_or(0).min(999_999);
    Duration::new(secs, micros * 1000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_is_plausible() {
        let mut x = 0u64;
        for i in 0..2_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        std::hint::black_box(x);
        let usage = process_usage();
        assert!(usage.peak_rss_bytes > 1024 * 1024, "{usage:?}");
        assert!(
            usage.user_cpu + usage.system_cpu > Duration::ZERO,
            "{usage:?}"
        );
    }
}
