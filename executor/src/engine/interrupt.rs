//! Stopping a running query from outside it: a client's cancel request, a statement
//! timeout, a client that went away.

use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::Notify;

/// A handle that stops the query it is given to ([`super::SqlSession::query_until`]),
/// from any thread, at any time: before the query starts (it then does not run) or
/// while it runs (its scans are dropped, which stops the daemon's work for them).
/// Cloning shares it.
#[derive(Debug, Clone, Default)]
pub struct Interrupt {
    inner: Arc<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    /// Why the query is stopped; the first reason given wins.
    reason: Mutex<Option<String>>,
    notify: Notify,
}

impl Interrupt {
    /// A handle that has not fired.
    pub fn new() -> Self {
        Self::default()
    }

    /// Stops the query, `reason` being what its error says ("canceling statement due
    /// to user request"). Firing again keeps the first reason.
    pub fn fire(&self, reason: impl Into<String>) {
        {
            let mut slot = self
                .inner
                .reason
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            if slot.is_none() {
                *slot = Some(reason.into());
            }
        }
        self.inner.notify.notify_waiters();
    }

    /// Why it fired, if it has.
    pub fn reason(&self) -> Option<String> {
        self.inner
            .reason
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Resolves once it has fired, with the reason.
    pub(crate) async fn fired(&self) -> String {
        loop {
            let notified = self.inner.notify.notified();
            tokio::pin!(notified);
            // Registered before the check: a fire between the check and the wait is
            // not lost.
            notified.as_mut().enable();
            if let Some(reason) = self.reason() {
                return reason;
            }
            notified.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_fire_before_the_wait_and_one_during_it_are_both_seen() {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_time()
            .build()
            .expect("runtime");
        let early = Interrupt::new();
        early.fire("first");
        early.fire("second");
        assert_eq!(rt.block_on(early.fired()), "first");

        let late = Interrupt::new();
        let firing = late.clone();
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(30));
            firing.fire("during");
        });
        let got = rt
            .block_on(async { tokio::time::timeout(Duration::from_secs(10), late.fired()).await });
        t.join().expect("thread");
        assert_eq!(got.expect("fired within 10 s"), "during");
    }
}
