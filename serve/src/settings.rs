//! A connection's PostgreSQL session parameters: what clients set at startup or with
//! `SET`, read back with `SHOW`, and the two that change what the host does
//! (`statement_timeout`, `TimeZone`, the latter kept by the engine).

use std::collections::BTreeMap;
use std::time::Duration;

/// A parameter the host knows: its name as PostgreSQL spells it and its default.
struct Known {
    name: &'static str,
    default: &'static str,
}

/// The parameters `SET` and `SHOW` accept. Ones that change nothing here are accepted
/// so that clients that set them (pgjdbc, psycopg, GUI tools) work; values are checked
/// where the host depends on them.
const KNOWN: &[Known] = &[
    Known {
        name: "application_name",
        default: "",
    },
    Known {
        name: "client_encoding",
        default: "UTF8",
    },
    Known {
        name: "DateStyle",
        default: "ISO, MDY",
    },
    Known {
        name: "IntervalStyle",
        default: "postgres",
    },
    Known {
        name: "TimeZone",
        default: "",
    },
    Known {
        name: "extra_float_digits",
        default: "1",
    },
    Known {
        name: "search_path",
        default: "\"$user\", public",
    },
    Known {
        name: "statement_timeout",
        default: "0",
    },
    Known {
        name: "lock_timeout",
        default: "0",
    },
    Known {
        name: "idle_in_transaction_session_timeout",
        default: "0",
    },
    Known {
        name: "idle_session_timeout",
        default: "0",
    },
    Known {
        name: "standard_conforming_strings",
        default: "on",
    },
    Known {
        name: "bytea_output",
        default: "hex",
    },
    Known {
        name: "client_min_messages",
        default: "notice",
    },
    Known {
        name: "default_transaction_isolation",
        default: "read committed",
    },
    Known {
        name: "transaction_isolation",
        default: "read committed",
    },
    Known {
        name: "default_transaction_read_only",
        default: "on",
    },
    Known {
        name: "transaction_read_only",
        default: "on",
    },
    Known {
        name: "server_version",
        default: crate::SERVER_VERSION,
    },
    Known {
        name: "server_version_num",
        default: crate::SERVER_VERSION_NUM,
    },
    Known {
        name: "server_encoding",
        default: "UTF8",
    },
    Known {
        name: "integer_datetimes",
        default: "on",
    },
    Known {
        name: "max_identifier_length",
        default: "63",
    },
    Known {
        name: "is_superuser",
        default: "off",
    },
    Known {
        name: "lc_messages",
        default: "C",
    },
    Known {
        name: "lc_monetary",
        default: "C",
    },
    Known {
        name: "lc_numeric",
        default: "C",
    },
    Known {
        name: "lc_time",
        default: "C",
    },
    Known {
        name: "jit",
        default: "off",
    },
    Known {
        name: "work_mem",
        default: "4MB",
    },
    Known {
        name: "synchronous_commit",
        default: "on",
    },
    Known {
        name: "row_security",
        default: "on",
    },
    // ringscan's own: off, each statement runs on the engine even when the result of
    // the same statement over the same files is cached (benchmarks, checks).
    Known {
        name: "ringscan.result_cache",
        default: "on",
    },
];

fn known(name: &str) -> Option<&'static Known> {
    KNOWN.iter().find(|k| k.name.eq_ignore_ascii_case(name))
}

/// Parameters that only the server sets.
fn read_only(name: &str) -> bool {
    matches!(
        name,
        "server_version"
            | "server_version_num"
            | "server_encoding"
            | "integer_datetimes"
            | "max_identifier_length"
            | "is_superuser"
    )
}

/// Why a `SET` was refused: the SQLSTATE and the message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Refused {
    pub(crate) code: &'static str,
    pub(crate) message: String,
}

fn refused(code: &'static str, message: String) -> Refused {
    Refused { code, message }
}

/// One connection's parameter values (those that differ from the defaults).
#[derive(Debug, Clone, Default)]
pub(crate) struct Settings {
    values: BTreeMap<&'static str, String>,
    /// Values the client sent in its startup message: what `RESET` goes back to.
    startup: BTreeMap<&'static str, String>,
    statement_timeout: Option<Duration>,
    /// `ringscan.result_cache = off`.
    no_result_cache: bool,
}

impl Settings {
    /// Takes the startup message's parameters; unknown ones (`user`, `database`,
    /// `options`...) are not settings and are ignored, bad values refused.
    pub(crate) fn from_startup<'a>(
        params: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<Self, Refused> {
        let mut settings = Self::default();
        let mut take = |name: &str, value: &str| -> Result<(), Refused> {
            if let Some(k) = known(name) {
                if !read_only(k.name) {
                    settings.set(k.name, Some(value))?;
                    settings.startup.insert(k.name, settings.get(k.name));
                }
            }
            Ok(())
        };
        for (name, value) in params {
            if name == "options" {
                // libpq's `options` (PGOPTIONS): `-c name=value` and `--name=value`.
                for (n, v) in command_line_options(value)? {
                    Self::canonical(&n)?;
                    take(&n, &v)?;
                }
            } else {
                take(name, value)?;
            }
        }
        Ok(settings)
    }

    /// The parameter's canonical name, or the error PostgreSQL gives for an unknown one.
    pub(crate) fn canonical(name: &str) -> Result<&'static str, Refused> {
        known(name).map(|k| k.name).ok_or_else(|| {
            refused(
                "42704",
                format!("unrecognized configuration parameter \"{name}\""),
            )
        })
    }

    /// Sets `name` to `value` (`None`: back to its startup value or default),
    /// checking the values the host depends on. `TimeZone` is the caller's to pass on
    /// to the engine.
    pub(crate) fn set(&mut self, name: &str, value: Option<&str>) -> Result<(), Refused> {
        let name = Self::canonical(name)?;
        if read_only(name) {
            return Err(refused(
                "55P02",
                format!("parameter \"{name}\" cannot be changed"),
            ));
        }
        let Some(value) = value else {
            match self.startup.get(name).cloned() {
                Some(v) => return self.set(name, Some(&v)),
                None => {
                    self.values.remove(name);
                    match name {
                        "statement_timeout" => self.statement_timeout = None,
                        "ringscan.result_cache" => self.no_result_cache = false,
                        _ => {}
                    }
                    return Ok(());
                }
            }
        };
        let value = value.trim();
        let invalid = |why: &str| {
            refused(
                "22023",
                format!("invalid value for parameter \"{name}\": \"{value}\"{why}"),
            )
        };
        match name {
            "client_encoding" => {
                let v = value.to_ascii_lowercase().replace(['-', '_'], "");
                // SQL_ASCII (what psql sends under the C locale) passes bytes through
                // unconverted: the host's UTF-8 reaches the client as it is.
                if !matches!(v.as_str(), "utf8" | "unicode" | "sqlascii") {
                    return Err(refused(
                        "0A000",
                        format!(
                            "client_encoding \"{value}\" is not supported: ringscan sends and \
                             reads UTF8 only"
                        ),
                    ));
                }
            }
            "DateStyle" if !value.to_ascii_uppercase().contains("ISO") => {
                return Err(refused(
                    "0A000",
                    format!(
                        "DateStyle \"{value}\" is not supported: ringscan writes dates in ISO \
                         format only"
                    ),
                ));
            }
            "IntervalStyle" if !value.eq_ignore_ascii_case("postgres") => {
                return Err(invalid(": only \"postgres\" is supported"));
            }
            "bytea_output" if !value.eq_ignore_ascii_case("hex") => {
                return Err(invalid(": only \"hex\" is supported"));
            }
            "standard_conforming_strings" if !matches!(value, "on" | "true" | "1") => {
                return Err(invalid(": only \"on\" is supported"));
            }
            "extra_float_digits" => match value.parse::<i32>() {
                Ok(-15..=3) => {}
                _ => return Err(invalid(": an integer from -15 to 3")),
            },
            "statement_timeout" => {
                let timeout =
                    duration_ms(value).ok_or_else(|| invalid(": a duration such as 500, '5s'"))?;
                self.statement_timeout = (!timeout.is_zero()).then_some(timeout);
            }
            "ringscan.result_cache" => {
                self.no_result_cache = match value.to_ascii_lowercase().as_str() {
                    "on" | "true" | "1" | "yes" => false,
                    "off" | "false" | "0" | "no" => true,
                    _ => return Err(invalid(": on or off")),
                };
            }
            _ => {}
        }
        self.values.insert(name, value.to_owned());
        Ok(())
    }

    /// The value the client gave `name` at startup, if it gave one.
    pub(crate) fn startup_value(&self, name: &str) -> Option<String> {
        let k = known(name)?;
        self.startup.get(k.name).cloned()
    }

    /// `RESET ALL`: every parameter back to its startup value or default.
    pub(crate) fn reset_all(&mut self) {
        self.values.clear();
        self.statement_timeout = None;
        self.no_result_cache = false;
        let startup = std::mem::take(&mut self.startup);
        for (name, value) in &startup {
            // Startup values were checked when they were taken.
            let _ = self.set(name, Some(value));
        }
        self.startup = startup;
    }

    /// The value `SHOW` prints (`TimeZone` is the engine's: the caller's to answer).
    pub(crate) fn get(&self, name: &str) -> String {
        let Some(k) = known(name) else {
            return String::new();
        };
        self.values
            .get(k.name)
            .cloned()
            .unwrap_or_else(|| k.default.to_owned())
    }

    /// Every parameter and its value, in name order (`SHOW ALL`).
    pub(crate) fn all(&self) -> Vec<(&'static str, String)> {
        let mut all: Vec<_> = KNOWN.iter().map(|k| (k.name, self.get(k.name))).collect();
        all.sort_by_key(|(name, _)| name.to_ascii_lowercase());
        all
    }

    /// Whether statements may be answered from (and fill) the result cache.
    pub(crate) fn result_cache(&self) -> bool {
        !self.no_result_cache
    }

    /// `statement_timeout`, when one is set.
    pub(crate) fn statement_timeout(&self) -> Option<Duration> {
        self.statement_timeout
    }
}

/// The `name=value` pairs of a startup `options` string: `-c name=value`,
/// `-cname=value` or `--name=value`, separated by spaces (`\ ` is a space in a value).
fn command_line_options(options: &str) -> Result<Vec<(String, String)>, Refused> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut chars = options.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => word.extend(chars.next()),
            c if c.is_whitespace() => {
                if !word.is_empty() {
                    words.push(std::mem::take(&mut word));
                }
            }
            c => word.push(c),
        }
    }
    if !word.is_empty() {
        words.push(word);
    }
    let mut pairs = Vec::new();
    let mut words = words.into_iter();
    while let Some(w) = words.next() {
        let pair = if let Some(rest) = w.strip_prefix("--") {
            rest.to_owned()
        } else if w == "-c" {
            words.next().unwrap_or_default()
        } else if let Some(rest) = w.strip_prefix("-c") {
            rest.to_owned()
        } else {
            return Err(refused(
                "08P01",
                format!("invalid command-line argument in the startup options: {w}"),
            ));
        };
        let (name, value) = pair.split_once('=').ok_or_else(|| {
            refused(
                "08P01",
                format!("startup option {pair:?} has no value (name=value)"),
            )
        })?;
        pairs.push((name.replace('-', "_"), value.to_owned()));
    }
    Ok(pairs)
}

/// A PostgreSQL duration setting: milliseconds by default, or with a unit (`us`, `ms`,
/// `s`, `min`, `h`, `d`).
fn duration_ms(value: &str) -> Option<Duration> {
    let value = value.trim();
    let split = value
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(value.len());
    let (number, unit) = value.split_at(split);
    let number: f64 = number.parse().ok()?;
    let ms = match unit.trim() {
        "" | "ms" => number,
        "us" => number / 1000.0,
        "s" => number * 1e3,
        "min" => number * 60e3,
        "h" => number * 3600e3,
        "d" => number * 86_400e3,
        _ => return None,
    };
    (ms.is_finite() && (0.0..=i32::MAX as f64).contains(&ms))
        .then(|| Duration::from_micros((ms * 1000.0) as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn startup_values_are_what_reset_returns_to() {
        let mut s =
            Settings::from_startup([("application_name", "psql"), ("user", "x")]).expect("ok");
        assert_eq!(s.get("application_name"), "psql");
        s.set("Application_Name", Some("other")).expect("set");
        assert_eq!(s.get("application_name"), "other");
        s.set("application_name", None).expect("reset");
        assert_eq!(s.get("application_name"), "psql");
        s.set("extra_float_digits", Some("3")).expect("set");
        s.reset_all();
        assert_eq!(s.get("extra_float_digits"), "1");
        assert_eq!(s.get("application_name"), "psql");
    }

    #[test]
    fn startup_options_set_parameters_as_libpq_sends_them() {
        let s = Settings::from_startup([(
            "options",
            "-c statement_timeout=250 --application-name=my\\ app -cDateStyle=ISO,DMY",
        )])
        .expect("ok");
        assert_eq!(s.statement_timeout(), Some(Duration::from_millis(250)));
        assert_eq!(s.get("application_name"), "my app");
        assert_eq!(s.get("DateStyle"), "ISO,DMY");
        assert_eq!(
            Settings::from_startup([("options", "-c nope=1")])
                .map(drop)
                .map_err(|e| e.code),
            Err("42704")
        );
        assert_eq!(
            Settings::from_startup([("options", "-x")])
                .map(drop)
                .map_err(|e| e.code),
            Err("08P01")
        );
    }

    #[test]
    fn statement_timeout_takes_units() {
        let mut s = Settings::default();
        for (v, want) in [("250", 250), ("2s", 2000), ("1min", 60_000), ("1.5s", 1500)] {
            s.set("statement_timeout", Some(v)).expect(v);
            assert_eq!(
                s.statement_timeout(),
                Some(Duration::from_millis(want)),
                "{v}"
            );
        }
        s.set("statement_timeout", Some("0")).expect("0");
        assert_eq!(s.statement_timeout(), None);
        assert_eq!(
            s.set("statement_timeout", Some("soon")).map_err(|e| e.code),
            Err("22023")
        );
    }

    #[test]
    fn values_the_host_depends_on_are_checked() {
        let mut s = Settings::default();
        assert_eq!(
            s.set("client_encoding", Some("LATIN1")).map_err(|e| e.code),
            Err("0A000")
        );
        assert!(s.set("client_encoding", Some("utf-8")).is_ok());
        assert_eq!(
            s.set("DateStyle", Some("German")).map_err(|e| e.code),
            Err("0A000")
        );
        assert!(s.set("datestyle", Some("ISO, DMY")).is_ok());
        assert_eq!(
            s.set("no_such_thing", Some("1")).map_err(|e| e.code),
            Err("42704")
        );
        assert_eq!(
            s.set("server_version", Some("1")).map_err(|e| e.code),
            Err("55P02")
        );
        assert_eq!(s.get("DATESTYLE"), "ISO, DMY");
    }
}
