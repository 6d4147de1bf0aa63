//! `ringscan-values`: the rules every ringscan process applies to SQL values, in one
//! place, so that the daemon's pruning and filtering and the engine cannot disagree.
//!
//! - [`date`]: days since 1970-01-01 ↔ civil dates (year, month, day) in the proleptic
//!   Gregorian calendar, and the one parser of date text (`2024-01-05`, `2024-1-5`) with
//!   the forms DuckDB accepts in a strict cast.
//! - [`float`]: how floats compare, as DuckDB compares them: `-0.0 = 0.0`, every NaN
//!   equal to every other NaN and greater than every number (+infinity included), and an
//!   integer compared with a float by value.
//!
//! This crate is a leaf with no dependencies: every member of the workspace may use it,
//! `profiling` and `ipc` included (which depend on no other member). It holds rules,
//! not types that cross a process boundary; those stay in `ringscan-ipc`.
//!
//! ```
//! use ringscan_values::{date, float};
//! assert_eq!(date::parse_date("2024-1-5"), Some(19_727));
//! assert_eq!(date::format_date(19_727), "2024-01-05");
//! assert!(float::cmp_f64(f64::NAN, f64::INFINITY).is_gt());
//! assert!(float::cmp_f64(-0.0, 0.0).is_eq());
//! ```

#![forbid(unsafe_code)]

pub mod date;
pub mod float;
