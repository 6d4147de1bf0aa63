//! The planner's own expression tree: small, owned, independent of `sqlparser`'s AST.

use std::fmt;

use arrow_schema::DataType;

/// A constant value.
#[derive(Debug, Clone, PartialEq)]
pub enum ScalarValue {
    /// SQL NULL.
    Null,
    /// `TRUE` / `FALSE`.
    Bool(bool),
    /// An integer literal (fits `i64`).
    Int64(i64),
    /// An integer literal above `i64::MAX`.
    UInt64(u64),
    /// A float literal (`1.5`, `1e3`).
    Float64(f64),
    /// A string literal.
    Utf8(String),
    /// A date, days since the Unix epoch.
    Date32(i32),
    /// A timestamp, microseconds since the Unix epoch, UTC.
    TimestampMicros(i64),
    /// An interval of whole months plus a fixed number of microseconds.
    Interval {
        /// Months (calendar arithmetic).
        months: i32,
        /// Days, hours, minutes and seconds, in microseconds.
        micros: i64,
    },
}

impl ScalarValue {
    /// The Arrow type of the value (`Null` for NULL).
    pub fn data_type(&self) -> DataType {
        use arrow_schema::{IntervalUnit, TimeUnit};
        match self {
            Self::Null => DataType::Null,
            Self::Bool(_) => DataType::Boolean,
            Self::Int64(_) => DataType::Int64,
            Self::UInt64(_) => DataType::UInt64,
            Self::Float64(_) => DataType::Float64,
            Self::Utf8(_) => DataType::Utf8,
            Self::Date32(_) => DataType::Date32,
            Self::TimestampMicros(_) => DataType::Timestamp(TimeUnit::Microsecond, None),
            Self::Interval { .. } => DataType::Interval(IntervalUnit::MonthDayNano),
        }
    }
}

impl fmt::Display for ScalarValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Null => f.write_str("NULL"),
            Self::Bool(b) => f.write_str(if *b { "TRUE" } else { "FALSE" }),
            Self::Int64(v) => write!(f, "{v}"),
            Self::UInt64(v) => write!(f, "{v}"),
            Self::Float64(v) => write!(f, "{v:?}"),
            Self::Utf8(s) => write!(f, "'{}'", s.replace('\'', "''")),
            Self::Date32(d) => write!(f, "DATE '{}'", crate::temporal::format_date(*d)),
            Self::TimestampMicros(t) => {
                write!(f, "TIMESTAMP '{}'", crate::temporal::format_timestamp(*t))
            }
            Self::Interval { months, micros } => {
                write!(f, "INTERVAL '{months} months {micros} microseconds'")
            }
        }
    }
}

/// A binary operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BinaryOp {
    /// `+`
    Plus,
    /// `-`
    Minus,
    /// `*`
    Multiply,
    /// `/` (always floating point, as in DuckDB ≥ 0.8).
    Divide,
    /// `=`
    Eq,
    /// `<>` or `!=`
    NotEq,
    /// `<`
    Lt,
    /// `<=`
    LtEq,
    /// `>`
    Gt,
    /// `>=`
    GtEq,
    /// `AND`
    And,
    /// `OR`
    Or,
}

impl BinaryOp {
    /// True for `= <> < <= > >=`.
    pub fn is_comparison(self) -> bool {
        matches!(
            self,
            Self::Eq | Self::NotEq | Self::Lt | Self::LtEq | Self::Gt | Self::GtEq
        )
    }

    /// True for `+ - * /`.
    pub fn is_arithmetic(self) -> bool {
        matches!(
            self,
            Self::Plus | Self::Minus | Self::Multiply | Self::Divide
        )
    }

    /// The SQL spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Plus => "+",
            Self::Minus => "-",
            Self::Multiply => "*",
            Self::Divide => "/",
            Self::Eq => "=",
            Self::NotEq => "<>",
            Self::Lt => "<",
            Self::LtEq => "<=",
            Self::Gt => ">",
            Self::GtEq => ">=",
            Self::And => "AND",
            Self::Or => "OR",
        }
    }
}

/// An aggregate function.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AggFunc {
    /// `count(*)`, `count(x)`, `count(DISTINCT x)`.
    Count,
    /// `sum(x)`.
    Sum,
    /// `avg(x)`.
    Avg,
    /// `min(x)`.
    Min,
    /// `max(x)`.
    Max,
}

impl AggFunc {
    /// Lower-case SQL name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Count => "count",
            Self::Sum => "sum",
            Self::Avg => "avg",
            Self::Min => "min",
            Self::Max => "max",
        }
    }
}

/// The unit `date_trunc` truncates to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TruncUnit {
    /// `'second'`
    Second,
    /// `'minute'`
    Minute,
    /// `'hour'`
    Hour,
    /// `'day'`
    Day,
    /// `'week'` (ISO: Monday)
    Week,
    /// `'month'`
    Month,
    /// `'quarter'`
    Quarter,
    /// `'year'`
    Year,
}

impl TruncUnit {
    /// Parses a unit name as `date_trunc` accepts it (case-insensitive, plural allowed).
    pub fn parse(s: &str) -> Option<Self> {
        let lower = s.to_ascii_lowercase();
        Some(match lower.trim_end_matches('s') {
            "second" => Self::Second,
            "minute" => Self::Minute,
            "hour" => Self::Hour,
            "day" => Self::Day,
            "week" => Self::Week,
            "month" => Self::Month,
            "quarter" => Self::Quarter,
            "year" => Self::Year,
            _ => return None,
        })
    }

    /// Lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Second => "second",
            Self::Minute => "minute",
            Self::Hour => "hour",
            Self::Day => "day",
            Self::Week => "week",
            Self::Month => "month",
            Self::Quarter => "quarter",
            Self::Year => "year",
        }
    }
}

/// A scalar or aggregate expression.
///
/// After binding, `Column` holds the schema's exact field name, and the tree is
/// type-checked (see [`crate::LogicalPlan`]).
#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    /// A column of the scanned table.
    Column(String),
    /// A constant.
    Literal(ScalarValue),
    /// `left op right`.
    Binary {
        /// Left operand.
        left: Box<Expr>,
        /// Operator.
        op: BinaryOp,
        /// Right operand.
        right: Box<Expr>,
    },
    /// `NOT expr`.
    Not(Box<Expr>),
    /// `-expr`.
    Negative(Box<Expr>),
    /// `expr [NOT] BETWEEN low AND high`.
    Between {
        /// Tested value.
        expr: Box<Expr>,
        /// Lower bound (inclusive).
        low: Box<Expr>,
        /// Upper bound (inclusive).
        high: Box<Expr>,
        /// `NOT BETWEEN`.
        negated: bool,
    },
    /// `expr [NOT] IN (list)`.
    InList {
        /// Tested value.
        expr: Box<Expr>,
        /// Candidates.
        list: Vec<Expr>,
        /// `NOT IN`.
        negated: bool,
    },
    /// `expr IS [NOT] NULL`.
    IsNull {
        /// Tested value.
        expr: Box<Expr>,
        /// `IS NOT NULL`.
        negated: bool,
    },
    /// `CAST(expr AS to)`.
    Cast {
        /// Value.
        expr: Box<Expr>,
        /// Target type.
        to: DataType,
    },
    /// `date_trunc('unit', expr)`.
    DateTrunc {
        /// Truncation unit.
        unit: TruncUnit,
        /// A timestamp or date.
        expr: Box<Expr>,
    },
    /// An aggregate call; `arg` is `None` for `count(*)`.
    Aggregate {
        /// Function.
        func: AggFunc,
        /// Argument.
        arg: Option<Box<Expr>>,
        /// `count(DISTINCT x)` and friends.
        distinct: bool,
    },
}

impl Expr {
    /// `left op right`.
    pub fn binary(left: Expr, op: BinaryOp, right: Expr) -> Self {
        Self::Binary {
            left: Box::new(left),
            op,
            right: Box::new(right),
        }
    }

    /// Direct children, in order.
    pub fn children(&self) -> Vec<&Expr> {
        match self {
            Self::Column(_) | Self::Literal(_) => vec![],
            Self::Binary { left, right, .. } => vec![left, right],
            Self::Not(e) | Self::Negative(e) => vec![e],
            Self::IsNull { expr, .. } | Self::Cast { expr, .. } | Self::DateTrunc { expr, .. } => {
                vec![expr]
            }
            Self::Between {
                expr, low, high, ..
            } => vec![expr, low, high],
            Self::InList { expr, list, .. } => {
                let mut v: Vec<&Expr> = vec![expr];
                v.extend(list.iter());
                v
            }
            Self::Aggregate { arg, .. } => arg.iter().map(|a| &**a).collect(),
        }
    }

    /// Calls `f` on this node and every descendant, parents first.
    pub fn walk<'a>(&'a self, f: &mut dyn FnMut(&'a Expr)) {
        f(self);
        for c in self.children() {
            c.walk(f);
        }
    }

    /// Column names referenced, in order of first appearance, without duplicates.
    pub fn columns(&self) -> Vec<&str> {
        let mut out: Vec<&str> = Vec::new();
        self.walk(&mut |e| {
            if let Expr::Column(c) = e {
                if !out.contains(&c.as_str()) {
                    out.push(c);
                }
            }
        });
        out
    }

    /// True when an aggregate call appears anywhere in the tree.
    pub fn contains_aggregate(&self) -> bool {
        let mut found = false;
        self.walk(&mut |e| found |= matches!(e, Expr::Aggregate { .. }));
        found
    }

    /// Splits a tree of `AND`s into its conjuncts (a non-`AND` is one conjunct).
    pub fn conjuncts(&self) -> Vec<&Expr> {
        match self {
            Self::Binary {
                left,
                op: BinaryOp::And,
                right,
            } => {
                let mut v = left.conjuncts();
                v.extend(right.conjuncts());
                v
            }
            other => vec![other],
        }
    }

    /// Joins conjuncts with `AND` (`None` for an empty list).
    pub fn and_all(conjuncts: Vec<Expr>) -> Option<Expr> {
        conjuncts
            .into_iter()
            .reduce(|acc, e| Expr::binary(acc, BinaryOp::And, e))
    }
}

impl fmt::Display for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Column(c) => f.write_str(c),
            Self::Literal(v) => write!(f, "{v}"),
            Self::Binary { left, op, right } => write!(f, "({left} {} {right})", op.as_str()),
            Self::Not(e) => write!(f, "(NOT {e})"),
            Self::Negative(e) => write!(f, "(-{e})"),
            Self::Between {
                expr,
                low,
                high,
                negated,
            } => {
                let not = if *negated { "NOT " } else { "" };
                write!(f, "({expr} {not}BETWEEN {low} AND {high})")
            }
            Self::InList {
                expr,
                list,
                negated,
            } => {
                let not = if *negated { "NOT " } else { "" };
                let items: Vec<String> = list.iter().map(ToString::to_string).collect();
                write!(f, "({expr} {not}IN ({}))", items.join(", "))
            }
            Self::IsNull { expr, negated } => {
                let not = if *negated { "NOT " } else { "" };
                write!(f, "({expr} IS {not}NULL)")
            }
            Self::Cast { expr, to } => write!(f, "CAST({expr} AS {to})"),
            Self::DateTrunc { unit, expr } => write!(f, "date_trunc('{}', {expr})", unit.name()),
            Self::Aggregate {
                func,
                arg,
                distinct,
            } => {
                let d = if *distinct { "DISTINCT " } else { "" };
                match arg {
                    Some(a) => write!(f, "{}({d}{a})", func.name()),
                    None => write!(f, "{}(*)", func.name()),
                }
            }
        }
    }
}
