//! The one way ringscan turns an error and its causes into text, for logs, for the
//! daemon's error replies (which cross to the client as text) and for the command line.

use std::error::Error;

/// The causes of `error` (not `error` itself), outermost first, each once: a cause whose
/// text the texts before it already hold is left out (parquet's and arrow's errors,
/// among others, repeat their source in their own message).
pub fn causes(error: &(dyn Error + 'static)) -> Vec<String> {
    let mut before = error.to_string();
    let mut out = Vec::new();
    let mut source = error.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        if !text.is_empty() && !before.contains(&text) {
            out.push(text.clone());
        }
        before.push('\n');
        before.push_str(&text);
        source = cause.source();
    }
    out
}

/// `error` and its [`causes`] on one line, joined by `": "`.
pub fn error_chain(error: &(dyn Error + 'static)) -> String {
    let mut text = error.to_string();
    for cause in causes(error) {
        text.push_str(": ");
        text.push_str(&cause);
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct E(&'static str, Option<Box<E>>);

    impl std::fmt::Display for E {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(self.0)
        }
    }

    impl Error for E {
        fn source(&self) -> Option<&(dyn Error + 'static)> {
            self.1.as_deref().map(|e| e as _)
        }
    }

    #[test]
    fn each_cause_once_outermost_first() {
        let io = E("disk full", None);
        let parquet = E("parquet error: disk full", Some(Box::new(io)));
        let top = E("writing /d/t.parquet", Some(Box::new(parquet)));
        assert_eq!(causes(&top), vec!["parquet error: disk full"]);
        assert_eq!(
            error_chain(&top),
            "writing /d/t.parquet: parquet error: disk full"
        );
        assert_eq!(error_chain(&E("alone", None)), "alone");
    }
}
