use std::sync::{Arc, OnceLock};
use std::time::Duration;

use ravi_gateway::{DirectTools, McpServer};
use ravi_kernel::Tool;
use serde_json::Value;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use crate::echo::Echo;

fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap()
    })
}

/// The MCP server on stdio framing (one JSON-RPC message per line) fed arbitrary bytes: never
/// a panic, every line it writes is a JSON-RPC 2.0 message, and it stops when its input ends.
pub fn mcp_stdio(data: &[u8]) {
    let echo: Arc<dyn Tool> = Arc::new(Echo);
    let server = McpServer::new(Arc::new(DirectTools::new(vec![echo])));
    runtime().block_on(async move {
        let (client_end, server_end) = tokio::io::duplex(1 << 20);
        let (server_read, server_write) = tokio::io::split(server_end);
        let serving = tokio::spawn(async move { server.serve_io(server_read, server_write).await });
        let (mut client_read, mut client_write) = tokio::io::split(client_end);
        let _ = client_write.write_all(data).await;
        let _ = client_write.shutdown().await;
        drop(client_write);
        let mut out = Vec::new();
        let read =
            tokio::time::timeout(Duration::from_secs(5), client_read.read_to_end(&mut out)).await;
        assert!(
            read.is_ok(),
            "the server did not stop after its input ended"
        );
        let ended = tokio::time::timeout(Duration::from_secs(5), serving).await;
        assert!(ended.is_ok(), "the server task did not end");
        for line in out.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
            let v: Value = serde_json::from_slice(line)
                .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(line)));
            assert_eq!(v["jsonrpc"], "2.0", "{v}");
        }
    });
}
