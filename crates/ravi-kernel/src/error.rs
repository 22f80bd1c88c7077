//! The kernel's error type: bad values handed to kernel constructors.

/// Errors raised when kernel values are built from bad input.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum KernelError {
    /// A field holds a value outside what it accepts.
    #[error("invalid {field} `{value}`: expected {expected}")]
    InvalidValue {
        /// The field or parameter name.
        field: String,
        /// The offending value as given.
        value: String,
        /// What would have been accepted.
        expected: String,
    },
    /// A chain policy whose limits contradict each other.
    #[error("invalid chain policy: {0}")]
    Policy(String),
}
