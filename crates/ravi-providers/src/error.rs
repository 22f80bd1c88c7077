//! Errors of building a provider client (the calls themselves fail with the kernel's
//! [`ModelError`](ravi_kernel::ModelError)).

/// Why a provider client could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProviderError {
    /// The API key's environment variable is not set.
    #[error("no API key: set {var} (or pass a key in the provider config)")]
    MissingApiKey {
        /// The variable to set, e.g. `OPENAI_API_KEY`.
        var: String,
    },
    /// A model spec string could not be understood.
    #[error("invalid model spec {spec:?}: expected {expected}")]
    InvalidSpec {
        /// The spec as given.
        spec: String,
        /// What a valid spec looks like.
        expected: String,
    },
    /// A setting (base URL, header) is not usable.
    #[error("invalid provider configuration: {0}")]
    InvalidConfig(String),
}
