//! The blob store contract (`ravi_test_support::blob::conformance`) on the stores of this
//! crate; the object-store one runs it in ravi-integrations.

use ravi_agents::blob::{FsBlobStore, MemoryBlobStore};

#[tokio::test]
async fn the_memory_store_keeps_the_contract() {
    ravi_test_support::blob::conformance(&MemoryBlobStore::new()).await;
}

#[tokio::test]
async fn the_file_store_keeps_the_contract() {
    let dir = tempfile::tempdir().unwrap();
    let store = FsBlobStore::open(dir.path()).unwrap().durable(false);
    ravi_test_support::blob::conformance(&store).await;
}
