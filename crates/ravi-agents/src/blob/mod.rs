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

use rand::Rng as _;
use ravi_kernel::{ArtifactRef, BlobError};

const REF_ALPHABET: &[u8; 36] = b"abcdefghijklmnopqrstuvwxyz0123456789";
const REF_RANDOM_CHARS: usize = 32;

/// A fresh random ref. Fails only if the kernel's ref rule no longer accepts the shape built
/// here, which the unit test below would catch first.
pub fn new_artifact_ref() -> Result<ArtifactRef, BlobError> {
    let mut rng = rand::rng();
    let mut s = String::with_capacity(ArtifactRef::PREFIX.len() + REF_RANDOM_CHARS);
    s.push_str(ArtifactRef::PREFIX);
    for _ in 0..REF_RANDOM_CHARS {
        let i = rng.random_range(0..REF_ALPHABET.len());
        s.push(char::from(REF_ALPHABET[i]));
    }
    ArtifactRef::parse(&s).map_err(|e| BlobError::Io(format!("could not mint a ref: {e}")))
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
        assert_eq!(a.as_str().len(), 4 + REF_RANDOM_CHARS);
        assert!(ArtifactRef::parse(a.as_str()).is_ok());
    }
}
