//! Blob stores: where large results and media live, out of the model's context and out of a
//! sandbox's memory.
//!
//! Refs are opaque and unguessable (`art_` + 32 random base-36 characters, about 165 bits),
//! never a content hash, and scoped: a session resolves only refs it or an ancestor created
//! (see [`BlobScope`](ravi_kernel::BlobScope)).

mod fs;
mod memory;

pub use fs::{FsBlobStore, GcReport};
pub use memory::MemoryBlobStore;

use ravi_kernel::{ArtifactRef, BlobError};

/// A fresh random ref ([`ArtifactRef::random`]).
pub fn new_artifact_ref() -> Result<ArtifactRef, BlobError> {
    Ok(ArtifactRef::random())
}

/// A random scope id for a new session.
pub fn new_scope_id() -> String {
    let n: u128 = rand::random();
    format!("ses_{n:032x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refs_are_random_and_well_formed() {
        let a = new_artifact_ref().unwrap();
        let b = new_artifact_ref().unwrap();
        assert_ne!(a, b);
        assert_eq!(a.as_str().len(), 4 + 32);
        assert!(ArtifactRef::parse(a.as_str()).is_ok());
    }
}
