//! Readable views of run records: a table of runs, and two runs side by side.

use std::fmt::Write as _;

use crate::counters::CounterKind;
use crate::record::{si, RunRecord};

/// Why a run could not be picked out of the records.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RunLookupError {
    /// No run id matches.
    #[error("no run matches {key:?}")]
    NotFound {
        /// What was asked for.
        key: String,
    },
    /// A prefix matches several runs.
    #[error("{key:?} matches {count} runs; give more of the run id")]
    Ambiguous {
        /// What was asked for.
        key: String,
        /// How many runs match.
        count: usize,
    },
}

/// Picks a run by exact id, unique id prefix, or `~N` (the N-th most recent, `~1` last).
pub fn find_run<'a>(records: &'a [RunRecord], key: &str) -> Result<&'a RunRecord, RunLookupError> {
    let not_found = || RunLookupError::NotFound {
        key: key.to_owned(),
    };
    if let Some(n) = key.strip_prefix('~') {
        let n: usize = n.parse().map_err(|_| not_found())?;
        return n
            .checked_sub(1)
            .and_then(|back| records.len().checked_sub(back + 1))
            .map(|i| &records[i])
            .ok_or_else(not_found);
    }
    if let Some(exact) = records.iter().rev().find(|r| r.run_id == key) {
        return Ok(exact);
    }
    let matches: Vec<&RunRecord> = records
        .iter()
        .filter(|r| r.run_id.starts_with(key))
        .collect();
    match matches.as_slice() {
        [] => Err(not_found()),
        [one] => Ok(one),
        many => Err(RunLookupError::Ambiguous {
            key: key.to_owned(),
            count: many.len(),
        }),
    }
}

fn opt(x: Option<f64>, f: impl Fn(f64) -> String) -> String {
    x.map_or_else(|| "n/a".to_owned(), f)
}

fn seconds(s: f64) -> String {
    if s >= 100.0 {
        format!("{s:.0} s")
    } else if s >= 1.0 {
        format!("{s:.2} s")
    } else {
        format!("{:.1} ms", s * 1e3)
    }
}

fn truncate(s: &str, max_chars: usize) -> String {
    if s.chars().count() <= max_chars {
        s.to_owned()
    } else {
        let mut t: String = s.chars().take(max_chars.saturating_sub(1)).collect();
        t.push('…');
        t
    }
}

/// The table of `ringscan runs`: one line per record, in the order given.
pub fn format_table(records: &[RunRecord]) -> String {
    let header = [
        "RUN ID",
        "TIME (UTC)",
        "COMMAND",
        "WALL",
        "CPU",
        "DAEMON CPU",
        "IPC",
        "CACHE-MISS",
        "BRANCH-MISS",
        "ROWS/S",
    ];
    let rows: Vec<[String; 10]> = records
        .iter()
        .map(|r| {
            let command = if r.args.is_empty() {
                r.command.clone()
            } else {
                format!("{} {}", r.command, r.args.join(" "))
            };
            [
                r.run_id.clone(),
                r.time.get(..19).unwrap_or(&r.time).replace('T', " "),
                truncate(&command, 40),
                seconds(r.wall_s()),
                seconds(r.cpu_s()),
                daemon_cpu(r),
                opt(r.counters.ipc(), |x| format!("{x:.2}")),
                opt(r.counters.cache_miss_rate(), |x| {
                    format!("{:.1}%", x * 100.0)
                }),
                opt(r.counters.branch_miss_rate(), |x| {
                    format!("{:.2}%", x * 100.0)
                }),
                opt(r.rows_per_s(), si),
            ]
        })
        .collect();
    let mut widths = header.map(|h| h.chars().count());
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let mut line = |cells: &[String]| {
        let mut l = String::new();
        for (i, (cell, w)) in cells.iter().zip(widths).enumerate() {
            // Text columns left-aligned, figures right-aligned.
            if i < 3 {
                let _ = write!(l, "{cell:<w$}  ");
            } else {
                let _ = write!(l, "{cell:>w$}  ");
            }
        }
        out.push_str(l.trim_end());
        out.push('\n');
    };
    line(&header.map(str::to_owned));
    for row in &rows {
        line(row);
    }
    if records.iter().any(|r| r.daemon_stage().is_some()) {
        out.push_str(
            "CPU: the recording process's (a query's executor); DAEMON CPU: task clock of \
             the IO daemon's scans for the query\n",
        );
    }
    // Said once, under the table, rather than on every row.
    let reasons: Vec<&str> = {
        let mut v: Vec<&str> = records
            .iter()
            .filter_map(|r| r.counters.hardware_unavailable.as_deref())
            .collect();
        v.sort_unstable();
        v.dedup();
        v
    };
    for why in reasons {
        let _ = writeln!(out, "n/a: hardware counters unavailable: {why}");
    }
    out
}

/// The task clock of the IO daemon's scans joined into a query's record; "-" for a
/// record without them (not a query, or written before they were joined).
fn daemon_cpu(r: &RunRecord) -> String {
    match r.daemon_stage() {
        None => "-".to_owned(),
        Some(d) => opt(
            d.counters
                .value(CounterKind::TaskClock)
                .map(|ns| ns as f64 / 1e9),
            seconds,
        ),
    }
}

/// Every figure of a record, by name, for comparison.
fn figures_of(r: &RunRecord) -> Vec<(String, Option<f64>)> {
    let mut v: Vec<(String, Option<f64>)> = vec![
        ("wall (s)".into(), Some(r.wall_s())),
        ("cpu (s)".into(), Some(r.cpu_s())),
        (
            "peak rss (MiB)".into(),
            Some(r.peak_rss_bytes as f64 / 1048576.0),
        ),
        ("ipc".into(), r.counters.ipc()),
        ("cache-miss rate".into(), r.counters.cache_miss_rate()),
        ("branch-miss rate".into(), r.counters.branch_miss_rate()),
        ("rows/s".into(), r.rows_per_s()),
    ];
    for kind in CounterKind::ALL {
        v.push((
            kind.name().to_owned(),
            r.counters.value(kind).map(|x| x as f64),
        ));
    }
    for (name, value) in &r.figures {
        v.push((format!("figure: {name}"), value.as_f64()));
    }
    // Another process's counters joined into the record (a query's daemon scans),
    // labelled with the process.
    for stage in r.stages.iter().filter(|s| s.process.is_some()) {
        let process = stage.process.as_deref().unwrap_or_default();
        for kind in CounterKind::ALL {
            v.push((
                format!("{process}: {}", kind.name()),
                stage.counters.value(kind).map(|x| x as f64),
            ));
        }
        for (name, value) in &stage.figures {
            v.push((format!("{process}: {name}"), value.as_f64()));
        }
    }
    v
}

fn number(x: Option<f64>) -> String {
    match x {
        None => "n/a".to_owned(),
        Some(x) if x.fract() == 0.0 && x.abs() < 1e15 => crate::record::thousands_signed(x),
        Some(x) if x.abs() >= 1000.0 => format!("{x:.0}"),
        Some(x) => format!("{x:.4}"),
    }
}

/// Two runs side by side, with the ratio B/A of every figure both have.
pub fn format_comparison(a: &RunRecord, b: &RunRecord) -> String {
    let fa = figures_of(a);
    let fb = figures_of(b);
    let mut names: Vec<&String> = fa.iter().map(|(n, _)| n).collect();
    for (n, _) in &fb {
        if !names.contains(&n) {
            names.push(n);
        }
    }
    let get =
        |f: &[(String, Option<f64>)], n: &str| f.iter().find(|(m, _)| m == n).and_then(|(_, v)| *v);
    let mut rows: Vec<[String; 4]> = vec![
        [
            "".into(),
            format!("A {}", a.run_id),
            format!("B {}", b.run_id),
            "B/A".into(),
        ],
        [
            "command".into(),
            truncate(&a.command, 30),
            truncate(&b.command, 30),
            "".into(),
        ],
    ];
    for n in names {
        let (x, y) = (get(&fa, n), get(&fb, n));
        let ratio = match (x, y) {
            (Some(x), Some(y)) if x != 0.0 => format!("{:.3}", y / x),
            _ => "n/a".to_owned(),
        };
        rows.push([n.clone(), number(x), number(y), ratio]);
    }
    let mut widths = [0usize; 4];
    for row in &rows {
        for (w, c) in widths.iter_mut().zip(row) {
            *w = (*w).max(c.chars().count());
        }
    }
    let mut out = String::new();
    for row in &rows {
        let [n, x, y, r] = row;
        let line = format!(
            "{n:<w0$}  {x:>w1$}  {y:>w2$}  {r:>w3$}",
            w0 = widths[0],
            w1 = widths[1],
            w2 = widths[2],
            w3 = widths[3]
        );
        out.push_str(line.trim_end());
        out.push('\n');
    }
    for (label, r) in [("A", a), ("B", b)] {
        if let Some(why) = &r.counters.hardware_unavailable {
            let _ = writeln!(out, "{label}: hardware counters unavailable: {why}");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::RunRecorder;

    fn rec(rows: u64) -> RunRecord {
        let mut f = serde_json::Map::new();
        f.insert("rows".into(), rows.into());
        RunRecorder::start("generate", vec!["--rows".into(), rows.to_string()]).finish(f)
    }

    #[test]
    fn lookup_by_id_prefix_and_position() {
        let mut a = rec(1);
        a.run_id = "20260101-000000-1".into();
        let mut b = rec(2);
        b.run_id = "20260101-000000-2".into();
        let records = vec![a, b];
        assert_eq!(
            find_run(&records, "~1").map(|r| r.args[1].as_str()),
            Ok("2")
        );
        assert_eq!(
            find_run(&records, "~2").map(|r| r.args[1].as_str()),
            Ok("1")
        );
        assert!(find_run(&records, "~3").is_err());
        assert!(find_run(&records, "~0").is_err());
        assert_eq!(
            find_run(&records, "20260101-000000-1").map(|r| r.args[1].as_str()),
            Ok("1")
        );
        assert!(matches!(
            find_run(&records, "2026"),
            Err(RunLookupError::Ambiguous { count: 2, .. })
        ));
        assert!(matches!(
            find_run(&records, "x"),
            Err(RunLookupError::NotFound { .. })
        ));
    }

    #[test]
    fn table_and_comparison_show_every_run_and_figure() {
        let (a, b) = (rec(1000), rec(2000));
        let table = format_table(&[a.clone(), b.clone()]);
        assert_eq!(
            table.lines().filter(|l| l.contains("generate")).count(),
            2,
            "{table}"
        );
        assert!(table.starts_with("RUN ID"));
        let cmp = format_comparison(&a, &b);
        assert!(cmp.contains("figure: rows"), "{cmp}");
        let rows_line = cmp
            .lines()
            .find(|l| l.starts_with("figure: rows"))
            .expect("rows");
        assert!(rows_line.trim_end().ends_with("2.000"), "{rows_line}");
        assert!(cmp.contains("task-clock"), "{cmp}");
    }
}
