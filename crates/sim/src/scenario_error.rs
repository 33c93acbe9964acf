//! Errors from reading a scenario file: each names the file, and where it can, the key and
//! the allowed values.

use std::fmt;

/// Why a scenario could not be loaded.
///
/// ```
/// use livecount_sim::Scenario;
///
/// let err = Scenario::from_toml_str("description = 'x'\nduration_s = -1", "bad.toml").unwrap_err();
/// let text = err.to_string();
/// assert!(text.starts_with("bad.toml: "), "{text}");
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum ScenarioError {
    /// The file could not be read.
    Io {
        /// The file.
        file: String,
        /// The underlying error.
        source: std::io::Error,
    },
    /// Not valid TOML, an unknown key, a missing key or a value of the wrong type.
    Parse {
        /// The file.
        file: String,
        /// The parser's message, with line and column.
        message: String,
    },
    /// A value outside its allowed range, or keys that do not go together.
    Invalid {
        /// The file.
        file: String,
        /// The dotted key, e.g. `sessions.cancel_share` or `backends[1].size`.
        key: String,
        /// The value found.
        value: String,
        /// What is allowed.
        allowed: String,
    },
}

impl ScenarioError {
    /// The key the error is about, when there is one.
    pub fn key(&self) -> Option<&str> {
        match self {
            Self::Invalid { key, .. } => Some(key),
            _ => None,
        }
    }
}

impl fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Io { file, source } => write!(f, "{file}: cannot read: {source}"),
            Self::Parse { file, message } => write!(f, "{file}: {}", message.trim_end()),
            Self::Invalid {
                file,
                key,
                value,
                allowed,
            } => write!(
                f,
                "{file}: {key} = {value} is not allowed (allowed: {allowed})"
            ),
        }
    }
}

impl std::error::Error for ScenarioError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}
