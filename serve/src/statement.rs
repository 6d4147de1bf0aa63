//! What a statement is, before the engine sees it: the host answers transaction
//! brackets and PostgreSQL's session parameters (`SET`, `SHOW`, `RESET`) itself, and
//! hands everything else to the engine.

/// A statement's class.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Class {
    /// The engine runs it and rows come back.
    Rows,
    /// The engine runs it; the command tag is this.
    Command(String),
    Begin,
    Commit,
    Rollback,
    /// `SET name = value` (`value` `None`: `SET name TO DEFAULT` or `RESET name`).
    Set {
        name: String,
        value: Option<String>,
        /// The tag: "SET" or "RESET".
        tag: &'static str,
    },
    /// `RESET ALL`.
    ResetAll,
    /// `SHOW name` (`all` for `SHOW ALL`).
    Show(String),
    /// `COPY ...`: the host reads it ([`crate::copy`]).
    Copy,
    /// `DISCARD ...`, `DEALLOCATE ...`: the host keeps no state these could clear
    /// that clients rely on; acknowledged with the tag.
    Acknowledge(String),
}

/// The class of one statement (no `;` inside).
pub(crate) fn classify(sql: &str) -> Class {
    let sql = without_leading_comments(sql);
    let words = Words::new(sql);
    let first = words.word(0);
    match first.as_str() {
        "SELECT" | "WITH" | "VALUES" | "EXPLAIN" | "TABLE" | "DESCRIBE" => Class::Rows,
        "BEGIN" | "START" => Class::Begin,
        "COMMIT" | "END" => Class::Commit,
        "ROLLBACK" | "ABORT" => Class::Rollback,
        "SET" => set(sql, &words),
        "RESET" => match words.word(1).as_str() {
            "ALL" => Class::ResetAll,
            _ => match name_after(sql, &words, 1) {
                Some((name, _)) => Class::Set {
                    name,
                    value: None,
                    tag: "RESET",
                },
                None => Class::Command("RESET".into()),
            },
        },
        "SHOW" => match name_after(sql, &words, 1) {
            Some((name, _)) if is_engine_setting(&name) => Class::Rows,
            Some((name, _)) => Class::Show(name.to_ascii_lowercase()),
            None => Class::Rows,
        },
        "COPY" => Class::Copy,
        "DISCARD" => Class::Acknowledge(format!("DISCARD {}", words.word(1))),
        "DEALLOCATE" => Class::Acknowledge("DEALLOCATE".into()),
        "" => Class::Command(String::new()),
        _ => Class::Command(command_tag(&words)),
    }
}

/// `sql` from its first token: leading whitespace and comments skipped.
fn without_leading_comments(mut sql: &str) -> &str {
    loop {
        sql = sql.trim_start();
        if let Some(rest) = sql.strip_prefix("--") {
            sql = rest.split_once('\n').map_or("", |(_, after)| after);
        } else if let Some(rest) = sql.strip_prefix("/*") {
            sql = rest.split_once("*/").map_or("", |(_, after)| after);
        } else {
            return sql;
        }
    }
}

/// A DataFusion setting (`datafusion.execution.batch_size`): the engine's to set and
/// show.
fn is_engine_setting(name: &str) -> bool {
    name.to_ascii_lowercase().starts_with("datafusion.")
}

/// `SET [SESSION | LOCAL] name { TO | = } value` and `SET TIME ZONE value`.
fn set(sql: &str, words: &Words) -> Class {
    let mut at = 1;
    if matches!(words.word(at).as_str(), "SESSION" | "LOCAL") {
        at += 1;
    }
    if words.word(at) == "TIME" && words.word(at + 1) == "ZONE" {
        let value = words.rest_from(sql, at + 2);
        return Class::Set {
            name: "timezone".into(),
            value: setting_value(value),
            tag: "SET",
        };
    }
    let Some((name, end)) = name_after(sql, words, at) else {
        return Class::Command("SET".into());
    };
    if is_engine_setting(&name) {
        return Class::Command("SET".into());
    }
    let rest = sql[end..].trim_start();
    let value = if let Some(v) = rest.strip_prefix('=') {
        v
    } else if rest.len() >= 2 && rest[..2].eq_ignore_ascii_case("TO") {
        &rest[2..]
    } else {
        // Not a form we know: the engine gives its syntax error.
        return Class::Command("SET".into());
    };
    Class::Set {
        name: name.to_ascii_lowercase(),
        value: setting_value(value),
        tag: "SET",
    }
}

/// A `SET` value as its text: quotes removed, list items joined by ", ", `DEFAULT`
/// as `None`.
fn setting_value(value: &str) -> Option<String> {
    let value = value.trim().trim_end_matches(';').trim();
    if value.eq_ignore_ascii_case("DEFAULT") || value.eq_ignore_ascii_case("LOCAL") {
        return None;
    }
    let mut items = Vec::new();
    let mut current = String::new();
    let mut chars = value.chars().peekable();
    let mut quoted = false;
    while let Some(c) = chars.next() {
        match c {
            '\'' if quoted && chars.peek() == Some(&'\'') => {
                chars.next();
                current.push('\'');
            }
            '\'' => quoted = !quoted,
            ',' if !quoted => items.push(std::mem::take(&mut current).trim().to_owned()),
            c => current.push(c),
        }
    }
    items.push(current.trim().to_owned());
    Some(items.join(", "))
}

/// The (possibly quoted, possibly dotted) name starting at word `at`, and the byte
/// offset just after it.
fn name_after(sql: &str, words: &Words, at: usize) -> Option<(String, usize)> {
    let (start, _) = *words.spans.get(at)?;
    let mut name = String::new();
    let mut chars = sql[start..].char_indices().peekable();
    let mut end = sql.len();
    let mut quoted = false;
    while let Some((i, c)) = chars.next() {
        match c {
            '"' if quoted && chars.peek().map(|(_, c)| *c) == Some('"') => {
                chars.next();
                name.push('"');
            }
            '"' => quoted = !quoted,
            c if quoted => name.push(c),
            c if c.is_alphanumeric() || c == '_' || c == '.' => name.push(c),
            _ => {
                end = start + i;
                break;
            }
        }
    }
    (!name.is_empty()).then_some((name, end))
}

/// A command's tag as PostgreSQL writes it: `CREATE VIEW`, `DROP TABLE`, `INSERT 0 n`
/// is the engine's business; here, the first words of the statement.
fn command_tag(words: &Words) -> String {
    let first = words.word(0);
    match first.as_str() {
        "CREATE" | "DROP" | "ALTER" => {
            let mut second = words.word(1);
            if second == "OR" {
                // CREATE OR REPLACE VIEW
                second = words.word(3);
            }
            if matches!(second.as_str(), "TEMP" | "TEMPORARY" | "EXTERNAL") {
                second = words.word(2);
            }
            format!("{first} {second}")
        }
        _ => first,
    }
}

/// The words of a statement, upper-cased, with their byte spans.
struct Words {
    spans: Vec<(usize, usize)>,
    upper: Vec<String>,
}

impl Words {
    fn new(sql: &str) -> Self {
        let mut spans = Vec::new();
        let mut upper = Vec::new();
        let mut start = None;
        // Comments before the first word are skipped by skipping everything that is
        // not part of a word; inside the statement, only the first few words matter.
        for (i, c) in sql.char_indices().chain(std::iter::once((sql.len(), ' '))) {
            let part = c.is_alphanumeric() || c == '_';
            match (start, part) {
                (None, true) => start = Some(i),
                (Some(s), false) => {
                    spans.push((s, i));
                    upper.push(sql[s..i].to_ascii_uppercase());
                    start = None;
                    if spans.len() == 8 {
                        break;
                    }
                }
                _ => {}
            }
        }
        Self { spans, upper }
    }

    fn word(&self, i: usize) -> String {
        self.upper.get(i).cloned().unwrap_or_default()
    }

    fn rest_from<'a>(&self, sql: &'a str, i: usize) -> &'a str {
        self.spans.get(i).map_or("", |(s, _)| &sql[*s..])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(name: &str, value: Option<&str>) -> Class {
        Class::Set {
            name: name.into(),
            value: value.map(Into::into),
            tag: "SET",
        }
    }

    #[test]
    fn session_parameters_are_the_hosts() {
        assert_eq!(
            classify("SET extra_float_digits = 3"),
            set("extra_float_digits", Some("3"))
        );
        assert_eq!(
            classify("set application_name to 'psql ''x'''"),
            set("application_name", Some("psql 'x'"))
        );
        assert_eq!(
            classify("SET SESSION TIME ZONE 'Europe/Berlin'"),
            set("timezone", Some("Europe/Berlin"))
        );
        assert_eq!(
            classify("SET search_path TO public, \"$user\""),
            set("search_path", Some("public, \"$user\""))
        );
        assert_eq!(classify("SET DateStyle = DEFAULT"), set("datestyle", None));
        assert_eq!(
            classify("RESET statement_timeout"),
            Class::Set {
                name: "statement_timeout".into(),
                value: None,
                tag: "RESET"
            }
        );
        assert_eq!(classify("RESET ALL"), Class::ResetAll);
        assert_eq!(classify("SHOW TimeZone"), Class::Show("timezone".into()));
        assert_eq!(classify("show all"), Class::Show("all".into()));
    }

    #[test]
    fn engine_settings_and_everything_else_go_to_the_engine() {
        assert_eq!(
            classify("SET datafusion.execution.batch_size = 1024"),
            Class::Command("SET".into())
        );
        assert_eq!(
            classify("SHOW datafusion.execution.batch_size"),
            Class::Rows
        );
        assert_eq!(classify("  select 1"), Class::Rows);
        assert_eq!(
            classify("-- the count\n/* of rows */ SELECT count(*) FROM t"),
            Class::Rows
        );
        assert_eq!(classify("(SELECT 1)"), Class::Rows);
        assert_eq!(
            classify("CREATE OR REPLACE VIEW v AS SELECT 1"),
            Class::Command("CREATE VIEW".into())
        );
        assert_eq!(
            classify("create temp view v as select 1"),
            Class::Command("CREATE VIEW".into())
        );
        assert_eq!(
            classify("begin isolation level read committed"),
            Class::Begin
        );
        assert_eq!(
            classify("DISCARD ALL"),
            Class::Acknowledge("DISCARD ALL".into())
        );
    }
}
