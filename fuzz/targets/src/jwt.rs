use std::sync::OnceLock;

use ravi_agents::access::AccessPolicy;
use ravi_gateway::auth::{JwtAuthenticator, JwtConfig};

struct Fixture {
    rt: tokio::runtime::Runtime,
    auth: JwtAuthenticator,
}

fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let jwks = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../crates/ravi-cli/tests/fixtures/jwt/jwks-a.json"
        );
        let mut config: JwtConfig = serde_json::from_value(serde_json::json!({
            "issuer": "https://idp.test",
            "resource": "http://127.0.0.1/mcp",
            "jwks_file": jwks,
            "jwks_min_refresh_secs": 3600,
        }))
        .unwrap();
        config.jwks_max_age_secs = 3600;
        let auth = rt
            .block_on(JwtAuthenticator::new(config, AccessPolicy::new().into()))
            .unwrap();
        Fixture { rt, auth }
    })
}

fn b64(bytes: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | (u32::from(*b) << (16 - 8 * i)));
        for i in 0..=chunk.len() {
            out.push(char::from(A[((n >> (18 - 6 * i)) & 63) as usize]));
        }
    }
    out
}

/// The gateway's JWT check (`JwtAuthenticator::principal`) on arbitrary tokens: never a panic,
/// and nothing is accepted that the test issuer's key did not sign. Half the inputs are raw
/// token text; the other half build a token whose header the fuzzer writes (any `alg`, any
/// `kid`, including an RSA key's id under an EC or HMAC algorithm — the inputs that make a
/// careless verifier use a key for the wrong family) over fixed claims and fuzzed signature
/// bytes.
pub fn jwt(data: &[u8]) {
    let f = fixture();
    let token = match data.split_first() {
        Some((0, rest)) => String::from_utf8_lossy(rest).into_owned(),
        Some((_, rest)) => {
            let split = rest.iter().position(|b| *b == 0).unwrap_or(rest.len());
            let (header, signature) = rest.split_at(split);
            let claims = br#"{"iss":"https://idp.test","aud":"http://127.0.0.1/mcp","sub":"x","exp":4102444800}"#;
            format!("{}.{}.{}", b64(header), b64(claims), b64(signature))
        }
        None => return,
    };
    let verdict = f.rt.block_on(f.auth.principal(&token));
    assert!(
        verdict.is_err(),
        "a token the issuer never signed was accepted: {token}"
    );
}
