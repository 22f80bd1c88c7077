//! Who is calling: the identity a gateway authenticated (an API key, a JWT's subject), carried
//! with every call into the invoker, the hooks, the journal and traces.

use serde::{Deserialize, Serialize};

/// An authenticated caller.
///
/// `#[non_exhaustive]`: built with [`Principal::new`] and the `with_*` methods.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Principal {
    /// The stable id policies name: `key:NAME` for an API key, the token's subject for a JWT.
    pub id: String,
    /// The groups it belongs to (policies may name groups instead of principals).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<String>,
    /// The OAuth scopes its token carries.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scopes: Vec<String>,
}

impl Principal {
    /// A principal of id `id`, in no group, with no scope.
    pub fn new(id: impl Into<String>) -> Self {
        Self {
            id: id.into(),
            groups: Vec::new(),
            scopes: Vec::new(),
        }
    }

    /// The same principal in `groups`.
    #[must_use]
    pub fn with_groups(mut self, groups: Vec<String>) -> Self {
        self.groups = groups;
        self
    }

    /// The same principal with `scopes`.
    #[must_use]
    pub fn with_scopes(mut self, scopes: Vec<String>) -> Self {
        self.scopes = scopes;
        self
    }
}

impl std::fmt::Display for Principal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.id)
    }
}
