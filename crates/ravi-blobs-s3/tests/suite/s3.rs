//! Artifacts on a real S3-protocol server (moto's, on 127.0.0.1): the blob store contract,
//! refs made through one handle resolving through another (what replicas do), collection by
//! age, and unreachable servers reported as errors.

use std::time::Duration;

use ravi_blobs_s3::{S3BlobStore, S3Location};
use ravi_kernel::{BlobError, BlobScope, BlobStore as _};
use ravi_test_support::s3;

fn open(url: &str) -> S3BlobStore {
    let mut loc = S3Location::parse(url).unwrap();
    loc.credentials = Some((s3::ACCESS_KEY.into(), s3::SECRET_KEY.into()));
    S3BlobStore::open(&loc).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s3_blobs_keep_the_contract_across_handles() {
    if !s3::ready("S3 blob store") {
        return;
    }
    let url = s3::bucket();
    let a = open(&url);
    ravi_test_support::blob::conformance(&a).await;
    // Another handle (another replica) resolves what the first stored; scoping holds there too.
    let b = open(&url);
    let scope = BlobScope::root("run_x").child("ses_1");
    let info = a.put(&scope, "shared".into(), "text/plain").await.unwrap();
    assert_eq!(
        b.resolve(&scope, &info.artifact_ref).await.unwrap(),
        "shared"
    );
    assert!(matches!(
        b.resolve(&BlobScope::root("run_y"), &info.artifact_ref)
            .await,
        Err(BlobError::Forbidden(_))
    ));
    b.check().await.unwrap();
    // Collection by age: nothing is younger than an hour old to collect; everything is older
    // than zero.
    assert_eq!(b.gc(Duration::from_secs(3600)).await.unwrap(), 0);
    let removed = b.gc(Duration::ZERO).await.unwrap();
    assert!(removed >= 5, "collected {removed}");
    assert!(matches!(
        open(&url).resolve(&scope, &info.artifact_ref).await,
        Err(BlobError::NotFound(_))
    ));
}

#[tokio::test]
async fn an_unreachable_server_is_an_error_naming_it() {
    let store = open("s3://b?endpoint=http://127.0.0.1:9&allow_http=true");
    let err = store.check().await.unwrap_err().to_string();
    assert!(err.contains("did not answer"), "{err}");
    let err = store
        .put(&BlobScope::root("r"), "x".into(), "text/plain")
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("storing art_"), "{err}");
}
