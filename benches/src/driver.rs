//! Runs a suite's scenarios on several sides, interleaved, and summarizes them.
//!
//! Per scenario: a fresh process per side (so its peak RSS is the scenario's own),
//! `prepare`, `warmup` untimed runs each, then `repeat` rounds in which every side runs
//! once, the starting side rotating each round (so neither side always runs on a cache
//! the other just warmed). Cold scenarios send `cold` before every run.

use std::process::Child;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::BenchError;
use crate::latency::LatencySummary;
use crate::side::SideClient;
use crate::suites::{Scenario, Target, Versus};

/// How a suite is measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunConfig {
    /// Untimed runs per side before measuring.
    pub warmup: usize,
    /// Timed runs per side.
    pub repeat: usize,
}

/// One side's figures for one scenario.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SideResult {
    /// `baseline`, `ringscan`.
    pub side: String,
    /// Latency, when it ran.
    pub latency: Option<LatencySummary>,
    /// Rows returned (the same on every run, else an error).
    pub rows: Option<u64>,
    /// Parquet bytes read per run, where known.
    pub bytes_read: Option<u64>,
    /// Peak resident set of the side's process.
    pub peak_rss_bytes: Option<u64>,
    /// Why it did not run (or ran wrong).
    pub error: Option<String>,
}

/// One scenario across sides.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScenarioResult {
    /// Scenario name.
    pub name: String,
    /// Its SQL.
    pub sql: String,
    /// Per side, in the order the sides were given.
    pub sides: Vec<SideResult>,
    /// Every side that ran returned the same number of rows.
    pub rows_agree: bool,
}

impl ScenarioResult {
    /// `side`'s result.
    pub fn side(&self, side: &str) -> Option<&SideResult> {
        self.sides.iter().find(|s| s.side == side)
    }

    /// p50 of `a` over p50 of `b`.
    pub fn ratio_p50(&self, a: &str, b: &str) -> Option<f64> {
        let p50 = |s: &str| self.side(s).and_then(|r| r.latency).map(|l| l.p50_us);
        Some(p50(a)? / p50(b)?)
    }
}

/// A target and whether ringscan met it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TargetResult {
    /// The target.
    pub target: Target,
    /// The measured figure (ratio, µs or MiB); `None` when it could not be measured here.
    pub measured: Option<f64>,
    /// `measured <= max`.
    pub met: Option<bool>,
}

/// Checks the targets this harness can measure (versus the baseline, absolute,
/// peak RSS); DuckDB targets are the compare script's.
pub fn check_targets(results: &[ScenarioResult], targets: &[Target]) -> Vec<TargetResult> {
    targets
        .iter()
        .map(|t| {
            let r = results.iter().find(|r| r.name == t.scenario);
            let ringscan = r.and_then(|r| r.side("ringscan"));
            let measured = match t.versus {
                Versus::Baseline => r.and_then(|r| r.ratio_p50("ringscan", "baseline")),
                Versus::AbsoluteUs => ringscan.and_then(|s| s.latency).map(|l| l.p50_us),
                Versus::PeakRssMib => ringscan
                    .and_then(|s| s.peak_rss_bytes)
                    .map(|b| b as f64 / (1024.0 * 1024.0)),
                Versus::Duckdb => None,
            };
            TargetResult {
                target: t.clone(),
                measured,
                met: measured.map(|m| m <= t.max),
            }
        })
        .collect()
}

struct Live {
    client: SideClient,
    samples: Vec<f64>,
    rows: Option<u64>,
    bytes_read: Option<u64>,
    error: Option<String>,
}

impl Live {
    fn fail(&mut self, e: &BenchError) {
        if self.error.is_none() {
            self.error = Some(e.to_string());
        }
    }

    fn run(&mut self, scenario: &Scenario, timed: bool) {
        if self.error.is_some() {
            return;
        }
        if scenario.cold {
            if let Err(e) = self.client.cold(&scenario.name) {
                return self.fail(&e);
            }
        }
        match self.client.run(&scenario.name) {
            Err(e) => self.fail(&e),
            Ok(run) => {
                if let Some(prev) = self.rows.filter(|r| *r != run.outcome.rows) {
                    self.error = Some(format!(
                        "returned {} rows, then {prev}: results differ between runs",
                        run.outcome.rows
                    ));
                    return;
                }
                self.rows = Some(run.outcome.rows);
                self.bytes_read = run.outcome.bytes_read;
                if timed {
                    self.samples.push(run.micros);
                }
            }
        }
    }
}

/// Runs `scenarios` on `sides`, spawning each side's process with `spawn(side)` (stdin
/// and stdout piped, stderr wherever the caller wants it).
pub fn run_sides(
    scenarios: &[Scenario],
    sides: &[&str],
    config: RunConfig,
    spawn: &mut dyn FnMut(&str) -> std::io::Result<Child>,
    progress: &mut dyn FnMut(&str),
) -> Vec<ScenarioResult> {
    let mut results = Vec::with_capacity(scenarios.len());
    for scenario in scenarios {
        progress(&scenario.name);
        let mut live: Vec<Result<Live, String>> = sides
            .iter()
            .map(|side| {
                let child = spawn(side).map_err(|e| format!("cannot start: {e}"))?;
                let mut client = SideClient::new(side, child).map_err(|e| e.to_string())?;
                client.prepare(&scenario.name).map_err(|e| e.to_string())?;
                Ok(Live {
                    client,
                    samples: Vec::with_capacity(config.repeat),
                    rows: None,
                    bytes_read: None,
                    error: None,
                })
            })
            .collect();
        let n = live.len();
        for _ in 0..config.warmup {
            for l in live.iter_mut().flatten() {
                l.run(scenario, false);
            }
        }
        for round in 0..config.repeat {
            for k in 0..n {
                if let Ok(l) = &mut live[(round + k) % n] {
                    l.run(scenario, true);
                }
            }
        }
        let sides_out: Vec<SideResult> = live
            .into_iter()
            .zip(sides)
            .map(|(l, side)| match l {
                Err(error) => SideResult {
                    side: (*side).to_owned(),
                    latency: None,
                    rows: None,
                    bytes_read: None,
                    peak_rss_bytes: None,
                    error: Some(error),
                },
                Ok(mut l) => {
                    let peak = l.client.rss().ok().map(|(hwm, _)| hwm);
                    l.client.quit(Duration::from_secs(5));
                    SideResult {
                        side: (*side).to_owned(),
                        latency: if l.error.is_none() {
                            LatencySummary::from_samples(&l.samples)
                        } else {
                            None
                        },
                        rows: l.rows,
                        bytes_read: l.bytes_read,
                        peak_rss_bytes: peak,
                        error: l.error,
                    }
                }
            })
            .collect();
        let mut counts = sides_out
            .iter()
            .filter(|s| s.error.is_none())
            .filter_map(|s| s.rows);
        let first = counts.next();
        let rows_agree = counts.all(|c| Some(c) == first);
        results.push(ScenarioResult {
            name: scenario.name.clone(),
            sql: scenario.sql.clone(),
            sides: sides_out,
            rows_agree,
        });
    }
    results
}

fn fmt_us(us: f64) -> String {
    if us >= 100_000.0 {
        format!("{:.0} ms", us / 1000.0)
    } else if us >= 1_000.0 {
        format!("{:.2} ms", us / 1000.0)
    } else {
        format!("{us:.0} µs")
    }
}

fn fmt_mib(bytes: Option<u64>) -> String {
    bytes.map_or("-".to_owned(), |b| format!("{:.1}", b as f64 / 1048576.0))
}

/// A plain-text table: one line per scenario and side, then the ratio.
pub fn render(results: &[ScenarioResult], targets: &[TargetResult]) -> String {
    let mut out = format!(
        "{:<24} {:<9} {:>10} {:>10} {:>10} {:>10} {:>9} {:>10}  {}\n",
        "scenario", "side", "mean", "p50", "p95", "p99", "rss MiB", "rows", "ringscan/baseline p50"
    );
    let mut last_error: Vec<Option<&str>> = Vec::new();
    for r in results {
        let ratio = r
            .ratio_p50("ringscan", "baseline")
            .map_or("-".to_owned(), |x| format!("{x:.3}x"));
        for (i, s) in r.sides.iter().enumerate() {
            let name = if i == 0 { r.name.as_str() } else { "" };
            match (&s.latency, &s.error) {
                (Some(l), None) => out.push_str(&format!(
                    "{:<24} {:<9} {:>10} {:>10} {:>10} {:>10} {:>9} {:>10}  {}\n",
                    name,
                    s.side,
                    fmt_us(l.mean_us),
                    fmt_us(l.p50_us),
                    fmt_us(l.p95_us),
                    fmt_us(l.p99_us),
                    fmt_mib(s.peak_rss_bytes),
                    s.rows.map_or("-".to_owned(), |r| r.to_string()),
                    if i + 1 == r.sides.len() {
                        ratio.as_str()
                    } else {
                        ""
                    },
                )),
                (_, error) => {
                    let error = error.as_deref().unwrap_or("no samples");
                    // The same reason on every scenario (a side that is not available)
                    // is said once.
                    let said = last_error.get(i).copied().flatten() == Some(error);
                    let reason = if said { "as above" } else { error };
                    out.push_str(&format!(
                        "{:<24} {:<9} not measured: {reason}\n",
                        name, s.side
                    ));
                }
            }
            if last_error.len() <= i {
                last_error.resize(i + 1, None);
            }
            last_error[i] = s.error.as_deref();
        }
        if !r.rows_agree {
            out.push_str(&format!(
                "!! {}: the sides returned different row counts\n",
                r.name
            ));
        }
    }
    for t in targets {
        let verdict = match (t.measured, t.met) {
            (Some(m), Some(true)) => format!("met ({m:.3})"),
            (Some(m), _) => format!("MISSED ({m:.3})"),
            (None, _) => "not measured here".to_owned(),
        };
        out.push_str(&format!(
            "target {:<22} {:<11} <= {:<8.3} {}: {}\n",
            t.target.scenario,
            format!("{:?}", t.target.versus).to_lowercase(),
            t.target.max,
            t.target.why,
            verdict
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn side(name: &str, p50_us: f64, rows: u64, error: Option<&str>) -> SideResult {
        SideResult {
            side: name.to_owned(),
            latency: LatencySummary::from_samples(&[p50_us]),
            rows: Some(rows),
            bytes_read: None,
            peak_rss_bytes: Some(10 << 20),
            error: error.map(str::to_owned),
        }
    }

    fn target(scenario: &str, versus: Versus, max: f64) -> Target {
        Target {
            scenario: scenario.to_owned(),
            versus,
            max,
            why: "test".to_owned(),
        }
    }

    #[test]
    fn targets_are_met_missed_or_not_measured() {
        let results = vec![
            ScenarioResult {
                name: "fast".into(),
                sql: String::new(),
                sides: vec![
                    side("baseline", 1000.0, 5, None),
                    side("ringscan", 50.0, 5, None),
                ],
                rows_agree: true,
            },
            ScenarioResult {
                name: "slow".into(),
                sql: String::new(),
                sides: vec![
                    side("baseline", 1000.0, 5, None),
                    side("ringscan", 900.0, 5, None),
                ],
                rows_agree: true,
            },
        ];
        let checked = check_targets(
            &results,
            &[
                target("fast", Versus::Baseline, 0.1),
                target("slow", Versus::Baseline, 0.1),
                target("fast", Versus::AbsoluteUs, 100.0),
                target("fast", Versus::PeakRssMib, 64.0),
                target("fast", Versus::Duckdb, 1.0),
                target("gone", Versus::Baseline, 1.0),
            ],
        );
        let met: Vec<Option<bool>> = checked.iter().map(|t| t.met).collect();
        assert_eq!(
            met,
            [Some(true), Some(false), Some(true), Some(true), None, None]
        );
        assert!((checked[0].measured.expect("ratio") - 0.05).abs() < 1e-12);
        let text = render(&results, &checked);
        assert!(text.contains("MISSED (0.900)"), "{text}");
        assert!(text.contains("0.050x"), "{text}");
    }

    #[test]
    fn render_flags_disagreeing_rows_and_says_a_repeated_reason_once() {
        let unavailable = Some("ringscan query is not available in this build");
        let results: Vec<ScenarioResult> = ["a", "b"]
            .iter()
            .map(|n| ScenarioResult {
                name: (*n).into(),
                sql: String::new(),
                sides: vec![
                    side("baseline", 10.0, 3, None),
                    side("ringscan", 1.0, 4, unavailable),
                ],
                rows_agree: *n == "a",
            })
            .collect();
        let text = render(&results, &[]);
        assert_eq!(
            text.matches("not available in this build").count(),
            1,
            "{text}"
        );
        assert!(text.contains("not measured: as above"), "{text}");
        assert!(
            text.contains("!! b: the sides returned different row counts"),
            "{text}"
        );
        assert!(!text.contains("!! a:"), "{text}");
    }
}
