//! `read_result` over a blob store: overview, byte ranges, line spans, regex matches with
//! context, scoping (a sibling session cannot read the artifact) and bad arguments.

use ravi_agents::Typed;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use ravi_capabilities::tools::ReadResult;
use ravi_kernel::*;
use serde_json::json;

/// A minimal scoped in-memory store, enough to exercise the tool through the kernel contract.
#[derive(Default)]
struct MemStore {
    blobs: Mutex<HashMap<ArtifactRef, (Bytes, BlobInfo)>>,
}

#[async_trait]
impl BlobStore for MemStore {
    async fn put(
        &self,
        scope: &BlobScope,
        data: Bytes,
        media_type: &str,
    ) -> Result<BlobInfo, BlobError> {
        let n = self.blobs.lock().unwrap().len();
        let artifact = ArtifactRef::parse(&format!("art_{n:026}")).unwrap();
        let info = BlobInfo {
            artifact_ref: artifact.clone(),
            size: data.len() as u64,
            media_type: media_type.into(),
            owner: scope.id.clone(),
            pins: 1,
        };
        self.blobs
            .lock()
            .unwrap()
            .insert(artifact, (data, info.clone()));
        Ok(info)
    }
    async fn resolve(&self, scope: &BlobScope, artifact: &ArtifactRef) -> Result<Bytes, BlobError> {
        let blobs = self.blobs.lock().unwrap();
        let (data, info) = blobs
            .get(artifact)
            .ok_or_else(|| BlobError::NotFound(artifact.clone()))?;
        if !scope.can_read(&info.owner) {
            return Err(BlobError::Forbidden(artifact.clone()));
        }
        Ok(data.clone())
    }
    async fn stat(&self, scope: &BlobScope, artifact: &ArtifactRef) -> Result<BlobInfo, BlobError> {
        let blobs = self.blobs.lock().unwrap();
        let (_, info) = blobs
            .get(artifact)
            .ok_or_else(|| BlobError::NotFound(artifact.clone()))?;
        if !scope.can_read(&info.owner) {
            return Err(BlobError::Forbidden(artifact.clone()));
        }
        Ok(info.clone())
    }
    async fn pin(&self, _: &ArtifactRef) -> Result<(), BlobError> {
        Ok(())
    }
    async fn unpin(&self, _: &ArtifactRef) -> Result<(), BlobError> {
        Ok(())
    }
}

async fn setup() -> (Arc<MemStore>, ToolContext, String, String) {
    let store = Arc::new(MemStore::default());
    let scope = BlobScope::root("run").child("session-a");
    let log: String = (1..=200)
        .map(|i| {
            format!(
                "line {i}{}\n",
                if i % 50 == 0 { " ERROR disk full" } else { "" }
            )
        })
        .collect();
    let text = store
        .put(&scope, Bytes::from(log), "text/plain")
        .await
        .unwrap();
    let bin = store
        .put(
            &scope,
            Bytes::from_static(&[0xff, 0xfe, 0, 1]),
            "application/octet-stream",
        )
        .await
        .unwrap();
    let ctx = {
        let mut r = ToolContext::default();
        r.artifacts = Some(ArtifactAccess::new(store.clone(), scope));
        r
    };
    (
        store,
        ctx,
        text.artifact_ref.to_string(),
        bin.artifact_ref.to_string(),
    )
}

#[tokio::test]
async fn overview_ranges_lines_and_regex() {
    let (_s, ctx, text, bin) = setup().await;
    let out = Typed::new(ReadResult)
        .execute(&ctx, json!({"ref": text}))
        .await
        .unwrap();
    let t = out.text_content();
    assert!(
        t.contains("text/plain, 1756 bytes, 200 lines. First 40 lines:"),
        "{t}"
    );
    assert!(
        t.contains("    40  line 40\n") && !t.contains("line 41\n"),
        "{t}"
    );

    let out = Typed::new(ReadResult)
        .execute(&ctx, json!({"ref": text, "bytes": {"start": 0, "end": 14}}))
        .await
        .unwrap();
    assert!(
        out.text_content()
            .ends_with("bytes 0..14 of 1756:\nline 1\nline 2\n"),
        "{}",
        out.text_content()
    );

    let out = Typed::new(ReadResult)
        .execute(
            &ctx,
            json!({"ref": text, "lines": {"start": 199, "end": 500}}),
        )
        .await
        .unwrap();
    assert!(
        out.text_content().ends_with(
            "lines 199..200 of 200:\n   199  line 199\n   200  line 200 ERROR disk full\n"
        ),
        "{}",
        out.text_content()
    );

    let out = Typed::new(ReadResult)
        .execute(&ctx, json!({"ref": text, "regex": "ERROR", "context": 1}))
        .await
        .unwrap();
    let t = out.text_content();
    assert!(t.contains("4 matching line(s) of 200"), "{t}");
    assert!(
        t.contains("    49- line 49\n    50: line 50 ERROR disk full\n    51- line 51\n--\n"),
        "{t}"
    );

    let out = Typed::new(ReadResult)
        .execute(
            &ctx,
            json!({"ref": text, "regex": "ERROR", "max_matches": 2}),
        )
        .await
        .unwrap();
    assert!(
        out.text_content().contains("more matches exist"),
        "{}",
        out.text_content()
    );

    let out = Typed::new(ReadResult)
        .execute(&ctx, json!({"ref": bin, "bytes": {"start": 0, "end": 4}}))
        .await
        .unwrap();
    assert!(
        out.text_content().contains("[binary; base64] //4AAQ=="),
        "{}",
        out.text_content()
    );
    let err = Typed::new(ReadResult)
        .execute(&ctx, json!({"ref": bin, "lines": {"start": 1, "end": 2}}))
        .await
        .unwrap_err();
    assert!(err.message.contains("only bytes ranges"), "{}", err.message);
}

#[tokio::test]
async fn scoping_and_bad_arguments() {
    let (store, ctx, text, _) = setup().await;
    let sibling = {
        let mut r = ToolContext::default();
        r.artifacts = Some(ArtifactAccess::new(
            store,
            BlobScope::root("run").child("session-b"),
        ));
        r
    };
    // Another session's ref reads exactly like one that does not exist: same kind, same words.
    let foreign = Typed::new(ReadResult)
        .execute(&sibling, json!({"ref": text}))
        .await
        .unwrap_err();
    assert_eq!(foreign.kind, ToolErrorKind::NotFound);
    assert_eq!(
        foreign.message,
        format!("artifact {text} does not exist (it was never stored or has expired)")
    );

    let err = Typed::new(ReadResult)
        .execute(&ToolContext::default(), json!({"ref": text}))
        .await
        .unwrap_err();
    assert!(err.message.contains("no artifact store"), "{}", err.message);

    let missing = format!("art_{:026}", 99);
    let err = Typed::new(ReadResult)
        .execute(&ctx, json!({"ref": missing}))
        .await
        .unwrap_err();
    assert_eq!(err.kind, ToolErrorKind::NotFound);

    for (args, needle) in [
        (json!({"ref": "sha256:abc"}), "artifact_ref"),
        (
            json!({"ref": text, "lines": {"start": 0, "end": 3}}),
            "1-based",
        ),
        (
            json!({"ref": text, "bytes": {"start": 9, "end": 3}}),
            "after bytes.end",
        ),
        (json!({"ref": text, "regex": "("}), "invalid regex"),
        (
            json!({"ref": text, "regex": "a", "lines": {"start": 1, "end": 2}}),
            "at most one",
        ),
    ] {
        let err = Typed::new(ReadResult)
            .execute(&ctx, args)
            .await
            .unwrap_err();
        assert!(err.message.contains(needle), "{needle}: {}", err.message);
    }
}
