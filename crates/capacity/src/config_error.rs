//! The error returned when a [`CapacityConfig`](crate::CapacityConfig) is out of range.

use std::fmt;

/// A configuration field that is outside its allowed range.
///
/// Names the field, the rejected value and the allowed range, so the message can be shown
/// to an operator as is.
///
/// ```
/// use livecount_capacity::CapacityConfig;
///
/// let err = CapacityConfig::builder().target_utilisation(1.5).build().unwrap_err();
/// assert_eq!(err.field(), "target_utilisation");
/// assert!(err.to_string().contains("(0, 1]"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    field: &'static str,
    value: String,
    allowed: &'static str,
}

impl ConfigError {
    pub(crate) fn new(field: &'static str, value: impl fmt::Debug, allowed: &'static str) -> Self {
        Self {
            field,
            value: format!("{value:?}"),
            allowed,
        }
    }

    /// The name of the rejected field, as spelled by the builder method that sets it.
    pub fn field(&self) -> &'static str {
        self.field
    }

    /// The allowed range, in interval notation (`"(0, 1]"`).
    pub fn allowed(&self) -> &'static str {
        self.allowed
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invalid capacity configuration: `{}` = {} is outside the allowed range {}",
            self.field, self.value, self.allowed
        )
    }
}

impl std::error::Error for ConfigError {}
