//! The line protocol between `ringscan bench` and one side of it (a child process per
//! side, so that each side's peak RSS is its own).
//!
//! Requests, one per line: `prepare <scenario>`, `run <scenario>`, `cold <scenario>`,
//! `rss`, `quit`. Replies, one per line: `ok` (prepare, cold), `ok <micros> <rows>
//! <bytes_read|->` (run, timed inside the side around [`Engine::run`] only), `ok
//! <peak_rss_bytes> <rss_bytes>` (rss, from `/proc/self/status`), or `error <text>`.
//! The Python compare script speaks the same protocol to its DuckDB and Polars workers.

use std::io::{BufRead, BufReader, BufWriter, Write};
use std::process::{Child, ChildStdin};
use std::sync::mpsc::{sync_channel, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use crate::engine::{Engine, RunOutcome};
use crate::error::BenchError;
use crate::suites::{find, Scenario};

/// Serves requests from `input` with `engine` until `quit` or end of input.
pub fn serve(
    engine: &mut dyn Engine,
    scenarios: &[Scenario],
    input: impl BufRead,
    mut output: impl Write,
) -> std::io::Result<()> {
    for line in input.lines() {
        let line = line?;
        let (verb, arg) = line.trim().split_once(' ').unwrap_or((line.trim(), ""));
        let reply = match verb {
            "quit" => break,
            "rss" => match peak_rss() {
                Some((hwm, rss)) => format!("ok {hwm} {rss}"),
                None => "error /proc/self/status has no VmHWM".to_owned(),
            },
            "prepare" | "run" | "cold" => match find(scenarios, arg) {
                Err(e) => format!("error {e}"),
                Ok(s) => match verb {
                    "prepare" => engine.prepare(s).map(|()| "ok".to_owned()),
                    "cold" => engine.make_cold().map(|()| "ok".to_owned()),
                    _ => {
                        let started = Instant::now();
                        let outcome = engine.run(s);
                        let micros = started.elapsed().as_secs_f64() * 1e6;
                        outcome.map(|o| {
                            let bytes = o.bytes_read.map_or("-".to_owned(), |b| b.to_string());
                            format!("ok {micros:.1} {} {bytes}", o.rows)
                        })
                    }
                }
                .unwrap_or_else(|e| format!("error {}", one_line(&e.to_string()))),
            },
            other => format!("error unknown request {other:?}"),
        };
        writeln!(output, "{reply}")?;
        output.flush()?;
    }
    Ok(())
}

fn one_line(text: &str) -> String {
    text.replace(['\n', '\r'], " ")
}

/// This process's peak and current resident set size in bytes (`VmHWM`, `VmRSS`).
pub fn peak_rss() -> Option<(u64, u64)> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|rest| {
                rest.trim()
                    .trim_end_matches("kB")
                    .trim()
                    .parse::<u64>()
                    .ok()
            })
            .map(|kib| kib * 1024)
    };
    Some((field("VmHWM:")?, field("VmRSS:")?))
}

/// One timed run, as a side reported it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TimedRun {
    /// Microseconds inside the side.
    pub micros: f64,
    /// What the run returned.
    pub outcome: RunOutcome,
}

/// How long a side may take to answer one request before it is killed.
pub const DEFAULT_REPLY_TIMEOUT: Duration = Duration::from_secs(600);

/// The harness's end of a side process.
#[derive(Debug)]
pub struct SideClient {
    side: String,
    child: Child,
    stdin: BufWriter<ChildStdin>,
    /// Reply lines, read by a thread so that every wait is bounded.
    replies: Receiver<std::io::Result<String>>,
    reply_timeout: Duration,
}

impl SideClient {
    /// Takes over a spawned side (stdin and stdout piped).
    pub fn new(side: &str, mut child: Child) -> Result<Self, BenchError> {
        let err = |what: &str| BenchError::Side {
            side: side.to_owned(),
            message: format!("{what} is not piped"),
        };
        let stdin = child.stdin.take().ok_or_else(|| err("stdin"))?;
        let stdout = child.stdout.take().ok_or_else(|| err("stdout"))?;
        // One request is in flight at a time, so the channel never holds more than one
        // reply; the reader ends when the side closes its stdout (exit or kill).
        let (tx, replies) = sync_channel(4);
        std::thread::Builder::new()
            .name(format!("bench-side-{side}"))
            .spawn(move || {
                for line in BufReader::new(stdout).lines() {
                    if tx.send(line).is_err() {
                        break;
                    }
                }
            })
            .map_err(|e| BenchError::Side {
                side: side.to_owned(),
                message: format!("cannot start its reader thread: {e}"),
            })?;
        Ok(Self {
            side: side.to_owned(),
            child,
            stdin: BufWriter::new(stdin),
            replies,
            reply_timeout: DEFAULT_REPLY_TIMEOUT,
        })
    }

    /// Sets how long one request may take before the side is killed.
    pub fn with_reply_timeout(mut self, timeout: Duration) -> Self {
        self.reply_timeout = timeout;
        self
    }

    /// The side's name.
    pub fn side(&self) -> &str {
        &self.side
    }

    fn request(&mut self, line: &str) -> Result<Vec<String>, BenchError> {
        let err = |message: String| BenchError::Side {
            side: self.side.clone(),
            message,
        };
        writeln!(self.stdin, "{line}")
            .and_then(|()| self.stdin.flush())
            .map_err(|e| err(format!("cannot send {line:?}: {e}")))?;
        let reply = match self.replies.recv_timeout(self.reply_timeout) {
            Ok(Ok(reply)) => reply,
            Ok(Err(e)) => return Err(err(format!("cannot read the reply to {line:?}: {e}"))),
            Err(RecvTimeoutError::Disconnected) => {
                return Err(err(format!("exited before answering {line:?}")))
            }
            Err(RecvTimeoutError::Timeout) => {
                let _ = self.child.kill();
                return Err(err(format!(
                    "no answer to {line:?} within {:.1} s; killed",
                    self.reply_timeout.as_secs_f64()
                )));
            }
        };
        let reply = reply.trim();
        if let Some(rest) = reply.strip_prefix("error") {
            return Err(err(rest.trim().to_owned()));
        }
        match reply.strip_prefix("ok") {
            Some(rest) => Ok(rest.split_whitespace().map(str::to_owned).collect()),
            None => Err(err(format!("answered {reply:?} to {line:?}"))),
        }
    }

    /// `prepare <scenario>`.
    pub fn prepare(&mut self, scenario: &str) -> Result<(), BenchError> {
        self.request(&format!("prepare {scenario}")).map(drop)
    }

    /// `cold <scenario>`.
    pub fn cold(&mut self, scenario: &str) -> Result<(), BenchError> {
        self.request(&format!("cold {scenario}")).map(drop)
    }

    /// `run <scenario>`.
    pub fn run(&mut self, scenario: &str) -> Result<TimedRun, BenchError> {
        let fields = self.request(&format!("run {scenario}"))?;
        let bad = || BenchError::Side {
            side: self.side.clone(),
            message: format!("malformed run reply {fields:?}"),
        };
        let micros: f64 = fields
            .first()
            .and_then(|f| f.parse().ok())
            .ok_or_else(bad)?;
        let rows: u64 = fields.get(1).and_then(|f| f.parse().ok()).ok_or_else(bad)?;
        let bytes_read = fields.get(2).and_then(|f| f.parse().ok());
        Ok(TimedRun {
            micros,
            outcome: RunOutcome { rows, bytes_read },
        })
    }

    /// `rss`: (peak, current) resident bytes of the side.
    pub fn rss(&mut self) -> Result<(u64, u64), BenchError> {
        let fields = self.request("rss")?;
        let parse = |i: usize| fields.get(i).and_then(|f| f.parse().ok());
        match (parse(0), parse(1)) {
            (Some(hwm), Some(rss)) => Ok((hwm, rss)),
            _ => Err(BenchError::Side {
                side: self.side.clone(),
                message: format!("malformed rss reply {fields:?}"),
            }),
        }
    }

    /// Asks the side to quit and waits for it (at most `timeout`, then kills it).
    pub fn quit(mut self, timeout: Duration) {
        let _ = writeln!(self.stdin, "quit").and_then(|()| self.stdin.flush());
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for SideClient {
    fn drop(&mut self) {
        // A side that was not quit (an error path) must not outlive the harness.
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::suites::{scenarios, Params, SuiteKind};

    #[derive(Debug)]
    struct Fake(u64);

    impl Engine for Fake {
        fn name(&self) -> &str {
            "fake"
        }
        fn prepare(&mut self, _: &Scenario) -> Result<(), BenchError> {
            Ok(())
        }
        fn run(&mut self, s: &Scenario) -> Result<RunOutcome, BenchError> {
            if s.name == "no_filter" {
                return Err(BenchError::NotAvailable("not wired\nyet".into()));
            }
            self.0 += 1;
            Ok(RunOutcome {
                rows: self.0,
                bytes_read: None,
            })
        }
    }

    #[test]
    fn a_side_that_does_not_answer_is_killed_after_the_timeout() {
        let child = std::process::Command::new("sleep")
            .arg("30")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("spawn sleep");
        let mut client = SideClient::new("sleepy", child)
            .expect("client")
            .with_reply_timeout(Duration::from_millis(200));
        let started = Instant::now();
        let err = client.prepare("x").expect_err("no answer");
        assert!(err.to_string().contains("within 0.2 s; killed"), "{err}");
        assert!(started.elapsed() < Duration::from_secs(5));
        let err = client.run("x").expect_err("dead side");
        assert!(err.to_string().contains("sleepy"), "{err}");
    }

    #[test]
    fn serve_answers_every_request_on_one_line() {
        let list = scenarios(SuiteKind::Pushdown, &Params::new());
        let input = "prepare filter_90\nrun filter_90\nrun filter_90\nrun no_filter\nrun nope\nbogus\nrss\nquit\nrun filter_90\n";
        let mut out = Vec::new();
        serve(&mut Fake(0), &list, input.as_bytes(), &mut out).expect("serve");
        let text = String::from_utf8(out).expect("utf8");
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 7, "{text}");
        assert_eq!(lines[0], "ok");
        assert!(
            lines[1].starts_with("ok ") && lines[1].ends_with(" 1 -"),
            "{}",
            lines[1]
        );
        assert!(lines[2].ends_with(" 2 -"));
        assert_eq!(lines[3], "error not wired yet");
        assert!(lines[4].starts_with("error unknown scenario"));
        assert!(lines[5].starts_with("error unknown request"));
        assert!(lines[6].starts_with("ok "), "{}", lines[6]);
    }
}
