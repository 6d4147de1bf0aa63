//! The executor's error type.

use arrow_schema::ArrowError;

/// Why a plan could not be run on the batches it was given.
///
/// Every variant names the expression or the columns at fault, so the CLI can print it
/// as is. Values are never wrapped silently: an overflow is an error.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ExecError {
    /// A batch (or the input schema) does not have the columns the scan was asked for.
    #[error("input schema mismatch: expected columns [{expected}], got [{got}]")]
    SchemaMismatch {
        /// The scan's projection, `name: type` each.
        expected: String,
        /// What arrived, `name: type` each.
        got: String,
    },
    /// An integer result that does not fit its type.
    #[error("overflow in {expr}: {detail}")]
    Overflow {
        /// The expression, as SQL text.
        expr: String,
        /// The kernel's message.
        detail: String,
    },
    /// Operand types the executor cannot combine (the binder should have refused them).
    #[error("type error in {expr}: {detail}")]
    Type {
        /// The expression, as SQL text.
        expr: String,
        /// What was wrong.
        detail: String,
    },
    /// A CAST that fails on a value (e.g. `CAST('abc' AS INTEGER)`).
    #[error("conversion error in {expr}: {detail}")]
    Cast {
        /// The expression, as SQL text.
        expr: String,
        /// The kernel's message.
        detail: String,
    },
    /// An integer division or modulo by zero that has no floating-point result.
    #[error("division by zero in {expr}")]
    DivideByZero {
        /// The expression, as SQL text.
        expr: String,
    },
    /// A column the plan refers to is missing from the batch.
    #[error("column '{name}' is not in the input")]
    MissingColumn {
        /// The column.
        name: String,
    },
    /// Something the executor does not implement (named).
    #[error("unsupported in executor: {what}")]
    Unsupported {
        /// What was refused.
        what: String,
    },
    /// The input stream failed.
    #[error("input failed: {0}")]
    Input(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// An Arrow kernel failed for another reason.
    #[error("{context}: {source}")]
    Arrow {
        /// What was being done.
        context: String,
        /// The kernel's error.
        #[source]
        source: ArrowError,
    },
}

impl ExecError {
    /// Maps a kernel error met while evaluating `expr`.
    pub(crate) fn kernel(expr: &dyn std::fmt::Display, e: ArrowError) -> Self {
        match e {
            ArrowError::ArithmeticOverflow(detail) => Self::Overflow {
                expr: expr.to_string(),
                detail,
            },
            ArrowError::DivideByZero => Self::DivideByZero {
                expr: expr.to_string(),
            },
            ArrowError::CastError(detail) | ArrowError::ParseError(detail) => Self::Cast {
                expr: expr.to_string(),
                detail,
            },
            ArrowError::ComputeError(detail) if detail.contains("verflow") => Self::Overflow {
                expr: expr.to_string(),
                detail,
            },
            source => Self::Arrow {
                context: format!("evaluating {expr}"),
                source,
            },
        }
    }

    pub(crate) fn arrow(context: impl Into<String>, source: ArrowError) -> Self {
        Self::Arrow {
            context: context.into(),
            source,
        }
    }
}
