//! The planner's error type.

use arrow_schema::DataType;

/// Why a SQL statement could not be planned.
///
/// Every variant names the thing at fault (the construct, the column, the types), so
/// the CLI can print it as is.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum PlanError {
    /// The text is not SQL that `sqlparser` understands.
    #[error("SQL parse error: {message}")]
    Parse {
        /// The parser's message (it carries the line and column).
        message: String,
    },
    /// Valid SQL, but outside the subset ringscan executes.
    #[error("unsupported: {construct}")]
    Unsupported {
        /// What was refused, e.g. `JOIN in FROM clause` or `function upper`.
        construct: String,
    },
    /// A column that the table does not have.
    #[error("unknown column '{name}'{}", suggestion_text(.suggestion))]
    UnknownColumn {
        /// The name as written.
        name: String,
        /// The nearest existing column, when one is close enough.
        suggestion: Option<String>,
    },
    /// A table or path that the catalog does not know.
    #[error("unknown table '{name}'")]
    UnknownTable {
        /// The table name or path as written.
        name: String,
    },
    /// Two operands whose types cannot be combined by `op`.
    #[error("type mismatch: cannot apply '{op}' to {left} and {right}")]
    TypeMismatch {
        /// The operator or construct (`+`, `=`, `BETWEEN`, `IN`...).
        op: String,
        /// Type of the left operand.
        left: DataType,
        /// Type of the right operand.
        right: DataType,
    },
    /// One operand of the wrong type (e.g. `sum` of a string, `WHERE` on a number).
    #[error("invalid type: {context} expects {expected}, got {got}")]
    InvalidType {
        /// Where the operand appears (`sum`, `WHERE clause`, `NOT`...).
        context: String,
        /// What was expected, in words.
        expected: String,
        /// The operand's type.
        got: DataType,
    },
    /// A literal that cannot be read (bad timestamp, number out of range...).
    #[error("invalid {kind} literal '{value}': {reason}")]
    InvalidLiteral {
        /// The literal's kind (`TIMESTAMP`, `DATE`, `LIMIT`...).
        kind: String,
        /// The text as written.
        value: String,
        /// Why it was refused.
        reason: String,
    },
    /// A column used outside an aggregate in a grouped query without being grouped.
    #[error(
        "column '{column}' must appear in the GROUP BY clause or be used in an aggregate \
         function ({clause})"
    )]
    Grouping {
        /// The column at fault.
        column: String,
        /// Where it appears (`SELECT list`, `HAVING clause`, `ORDER BY clause`).
        clause: String,
    },
    /// An aggregate where aggregates are not allowed, or nested in another.
    #[error("aggregate function {function} is not allowed in {clause}")]
    MisplacedAggregate {
        /// The aggregate, e.g. `sum`.
        function: String,
        /// The clause (`WHERE clause`, `GROUP BY clause`, `an aggregate argument`).
        clause: String,
    },
    /// An ORDER BY or GROUP BY position outside the select list.
    #[error("{clause} position {position} is not in the select list (1..={len})")]
    BadPosition {
        /// `ORDER BY` or `GROUP BY`.
        clause: String,
        /// The position as written.
        position: u64,
        /// Number of select items.
        len: usize,
    },
    /// With SELECT DISTINCT, an ORDER BY expression that is not selected.
    #[error("for SELECT DISTINCT, ORDER BY expression '{expr}' must appear in the select list")]
    DistinctOrderBy {
        /// The sort expression.
        expr: String,
    },
}

fn suggestion_text(suggestion: &Option<String>) -> String {
    match suggestion {
        Some(s) => format!("; did you mean '{s}'?"),
        None => String::new(),
    }
}

impl PlanError {
    pub(crate) fn unsupported(construct: impl Into<String>) -> Self {
        Self::Unsupported {
            construct: construct.into(),
        }
    }
}
