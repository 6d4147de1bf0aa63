//! A running `ringscan serve` for the tests that connect to it with real clients.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running `ringscan serve`, logging to a file (never the test's own output), killed
/// and reaped when dropped, so a failing test leaves no host behind.
pub(crate) struct Host {
    pub(crate) child: Child,
    pub(crate) port: u16,
}

impl Host {
    /// Starts `ringscan serve --listen 127.0.0.1:0 --data DATA OPTIONS...` and waits (at
    /// most 30 s) for its `listening on` line in `log`.
    pub(crate) fn start(data: &Path, log: &Path, options: &[&str]) -> Self {
        Self::start_on("127.0.0.1:0", data, log, options)
    }

    /// [`Host::start`] listening on `listen`.
    pub(crate) fn start_on(listen: &str, data: &Path, log: &Path, options: &[&str]) -> Self {
        Self::start_with_env(listen, data, log, options, &[])
    }

    /// [`Host::start_on`] with variables `env` set in the host's environment.
    pub(crate) fn start_with_env(
        listen: &str,
        data: &Path,
        log: &Path,
        options: &[&str],
        env: &[(&str, &str)],
    ) -> Self {
        let out = std::fs::File::create(log).expect("log");
        let child = Command::new(env!("CARGO_BIN_EXE_ringscan"))
            .args(["serve", "--listen", listen, "--data"])
            .arg(data)
            .args(options)
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(out.try_clone().expect("log"))
            .stderr(out)
            .spawn()
            .expect("spawn ringscan serve");
        // Owned by the guard from here: a failure below kills and reaps it.
        let mut host = Self { child, port: 0 };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let text = std::fs::read_to_string(log).unwrap_or_default();
            if let Some(port) = text
                .lines()
                .find_map(|l| l.strip_prefix("listening on 127.0.0.1:"))
            {
                host.port = port.trim().parse().expect("port");
                return host;
            }
            assert!(
                host.child.try_wait().expect("wait").is_none(),
                "ringscan serve exited before listening: {text}"
            );
            assert!(Instant::now() < deadline, "no 'listening on' line: {text}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
