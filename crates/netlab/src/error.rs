//! The one error type of the crate: each variant names what was being done, so that a
//! failure deep in a lab build says which namespace, link or tool it was about.

use std::io;

/// Why a namespace, a link or a lab could not be built or removed.
///
/// Messages carry the context only; the cause is the error's `source()`, so that a
/// caller printing the chain shows each piece once.
#[derive(Debug, thiserror::Error)]
pub enum NetlabError {
    /// A system call on a namespace or a file failed.
    #[error("{what}")]
    Io {
        /// What was being done, with the names involved.
        what: String,
        /// The system's error.
        #[source]
        source: io::Error,
    },
    /// The kernel refused a netlink request.
    #[error("netlink: {what}")]
    Netlink {
        /// The request, with the names involved.
        what: String,
        /// rtnetlink's error (the kernel's errno for a NACK).
        #[source]
        source: rtnetlink::Error,
    },
    /// A name the caller gave cannot name a namespace file or an interface.
    #[error("invalid name {name:?}: {why}")]
    InvalidName {
        /// The name as given.
        name: String,
        /// What is wrong with it.
        why: &'static str,
    },
    /// A program the data path needs is not installed.
    #[error("missing tool: {0}")]
    MissingTool(String),
    /// A program the data path needs ran and failed.
    #[error("{tool} in namespace {ns} failed: {stderr}")]
    ToolFailed {
        /// The program.
        tool: &'static str,
        /// The namespace it ran in.
        ns: String,
        /// What it printed on stderr (trimmed).
        stderr: String,
    },
    /// Asked of a data path that cannot do it.
    #[error("{0}")]
    Unsupported(String),
    /// A link whose name the lab gave was not found in its namespace.
    #[error("no link named {0:?}")]
    NoSuchLink(String),
}

impl NetlabError {
    /// The error and each of its causes on one line (`a: b: c`), for a message that
    /// is printed once and not walked again.
    pub fn with_causes(&self) -> String {
        let mut out = self.to_string();
        let mut src = std::error::Error::source(self);
        while let Some(s) = src {
            out.push_str(": ");
            out.push_str(&s.to_string());
            src = s.source();
        }
        out
    }

    /// `Ok` when a name check found nothing wrong (`why` is `None`), else the error
    /// naming the name and what is wrong with it.
    pub(crate) fn check_name(name: &str, why: Option<&'static str>) -> Result<(), Self> {
        match why {
            Some(why) => Err(NetlabError::InvalidName {
                name: name.to_string(),
                why,
            }),
            None => Ok(()),
        }
    }

    pub(crate) fn io(what: impl Into<String>, source: impl Into<io::Error>) -> Self {
        NetlabError::Io {
            what: what.into(),
            source: source.into(),
        }
    }

    pub(crate) fn netlink(what: impl Into<String>, source: rtnetlink::Error) -> Self {
        NetlabError::Netlink {
            what: what.into(),
            source,
        }
    }

    /// The errno of a refused netlink request, if that is what this error is.
    pub(crate) fn netlink_errno(&self) -> Option<i32> {
        match self {
            NetlabError::Netlink {
                source: rtnetlink::Error::NetlinkError(msg),
                ..
            } => msg.to_io().raw_os_error(),
            _ => None,
        }
    }
}
