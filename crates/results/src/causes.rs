//! An error and its causes as one line (`outer: inner: root`), the one way every
//! part prints an error it does not return: the binary's last line, a warning kept
//! in a result, an event's detail.
//!
//! The workspace's error types follow one rule: a message carries only its own
//! context and never its cause's text; the cause is `source()`. So a line is made by
//! walking the chain, and each cause appears once. Errors of other crates do not all
//! follow it (kube-rs writes `ApiError: <status> (<status, debugged>)` over the
//! status it also returns as its source; hyper's wrappers repeat their cause): a
//! message that already contains the text of its cause is left out for that cause,
//! which says the same more precisely. Ours never contain their cause, so nothing of
//! theirs is ever left out.

use std::error::Error;
use std::fmt;

/// Displays an error and each of its causes, joined by `": "`.
pub struct Causes<'a>(pub &'a dyn Error);

impl fmt::Display for Causes<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut texts = vec![self.0.to_string()];
        let mut next = self.0.source();
        while let Some(c) = next {
            texts.push(c.to_string());
            next = c.source();
        }
        texts.retain(|t| !t.is_empty());
        let mut first = true;
        for (i, t) in texts.iter().enumerate() {
            if texts
                .get(i + 1)
                .is_some_and(|cause| t.contains(cause.as_str()))
            {
                continue;
            }
            if !first {
                f.write_str(": ")?;
            }
            f.write_str(t)?;
            first = false;
        }
        Ok(())
    }
}

/// `e` and each of its causes on one line: `outer: inner: root`.
pub fn with_causes(e: &dyn Error) -> String {
    Causes(e).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("listen 127.0.0.1:80")]
    struct Bind {
        source: std::io::Error,
    }

    #[derive(Debug, thiserror::Error)]
    #[error("backend")]
    struct Backend(#[source] Bind);

    /// A foreign error that repeats its cause in its own message (as kube-rs's
    /// `ApiError: {status} ({status:?})` does).
    #[derive(Debug, thiserror::Error)]
    #[error("ApiError: {0} (Status {{ code: 409 }})")]
    struct Api(#[source] Status);

    #[derive(Debug, thiserror::Error)]
    #[error("namespaces \"x\" already exists: AlreadyExists")]
    struct Status;

    #[derive(Debug, thiserror::Error)]
    #[error("kubernetes: create namespace x")]
    struct Ours(#[source] Api);

    #[test]
    fn each_cause_is_printed_once_in_order() {
        let io = std::io::Error::from_raw_os_error(98);
        let e = Backend(Bind { source: io });
        assert_eq!(
            with_causes(&e),
            "backend: listen 127.0.0.1:80: Address already in use (os error 98)"
        );
        assert_eq!(with_causes(&Status), Status.to_string());
    }

    #[test]
    fn a_foreign_message_that_repeats_its_cause_gives_way_to_it() {
        assert_eq!(
            with_causes(&Ours(Api(Status))),
            "kubernetes: create namespace x: namespaces \"x\" already exists: AlreadyExists"
        );
    }
}
