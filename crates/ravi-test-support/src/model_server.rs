//! Model providers played back: responses recorded from each provider's API reference (the
//! cassettes in `ravi-providers/tests/cassettes/`, one folder per provider), served by a
//! local HTTP server on 127.0.0.1.

use std::path::Path;

use serde_json::Value;
use wiremock::matchers::method;
use wiremock::{Mock, MockServer, Respond, ResponseTemplate};

/// The recorded response `ravi-providers/tests/cassettes/REL`.
pub fn cassette(rel: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../ravi-providers/tests/cassettes")
        .join(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A 200 answer carrying `raw` as JSON.
pub fn json_body(raw: String) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_raw(raw, "application/json")
}

/// A 200 answer carrying `raw` as a server-sent-events stream.
pub fn sse(raw: String) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_raw(raw, "text/event-stream")
}

/// A local server answering every POST with `answer` (a [`ResponseTemplate`], or a function
/// of the request that returns one).
pub async fn serving(answer: impl Respond + 'static) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(answer)
        .mount(&server)
        .await;
    server
}

/// A local server answering the first POST with `first` and every later one with `then`: a
/// model that asks for a tool call, then answers.
pub async fn serving_first_then(
    first: impl Respond + 'static,
    then: impl Respond + 'static,
) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(first)
        .up_to_n_times(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .respond_with(then)
        .mount(&server)
        .await;
    server
}

/// Every request body `server` received, in order, as JSON.
pub async fn bodies(server: &MockServer) -> Vec<Value> {
    server
        .received_requests()
        .await
        .unwrap_or_default()
        .iter()
        .map(|r| {
            serde_json::from_slice(&r.body)
                .unwrap_or_else(|e| panic!("a request body is not JSON ({e})"))
        })
        .collect()
}
