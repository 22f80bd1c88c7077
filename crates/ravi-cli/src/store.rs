//! The durable store every command that runs tools shares: which one (`--store URL`, else
//! `RAVI_STORE`, else `[store] url` in ravi.toml, else the SQLite file under the state
//! directory), and the blob store its journaled results' artifacts live in.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context as _, bail};
use ravi_agents::blob::FsBlobStore;
use ravi_kernel::{BlobStore, Store};

use crate::config::RaviConfig;

/// The environment variable naming the store when `--store` is not given.
pub const ENV: &str = "RAVI_STORE";

/// `$XDG_STATE_HOME/ravi`, else `~/.local/state/ravi`: where the default store and its
/// artifacts live (outside any workspace, so a script cannot reach them).
pub fn state_dir() -> anyhow::Result<PathBuf> {
    if let Some(dir) = std::env::var_os("XDG_STATE_HOME").filter(|d| !d.is_empty()) {
        let dir = PathBuf::from(dir);
        if dir.is_absolute() {
            return Ok(dir.join("ravi"));
        }
    }
    let Some(home) = std::env::var_os("HOME").filter(|h| !h.is_empty()) else {
        bail!(
            "cannot find the state directory: neither XDG_STATE_HOME nor HOME is set; pass \
             --store URL (or --store none)"
        );
    };
    Ok(PathBuf::from(home).join(".local/state/ravi"))
}

/// Which store to use: `None` for `none`.
pub fn url(flag: Option<&str>, config: &RaviConfig) -> anyhow::Result<Option<String>> {
    let env = std::env::var(ENV).ok().filter(|v| !v.trim().is_empty());
    let chosen = match (flag, env, &config.store_url) {
        (Some(f), _, _) => f.to_owned(),
        (None, Some(e), _) => e,
        (None, None, Some(c)) => c.clone(),
        (None, None, None) => {
            let path = state_dir()?.join("ravi.db");
            format!("sqlite:{}", path.display())
        }
    };
    let chosen = chosen.trim().to_owned();
    if chosen == "none" {
        return Ok(None);
    }
    if !(chosen.starts_with("sqlite:")
        || chosen.starts_with("postgres://")
        || chosen.starts_with("postgresql://"))
    {
        bail!("--store `{chosen}`: expected `sqlite:PATH`, `postgres://USER@HOST/DB` or `none`");
    }
    Ok(Some(chosen))
}

/// Opens the store at `url` (creating and migrating it as needed).
pub async fn open(url: &str) -> anyhow::Result<Arc<dyn Store>> {
    #[cfg(any(feature = "store-sqlite", feature = "store-postgres"))]
    {
        let store = ravi_store_sql::SqlStore::open(url)
            .await
            .with_context(|| format!("opening the store {url}"))?;
        Ok(Arc::new(store))
    }
    #[cfg(not(any(feature = "store-sqlite", feature = "store-postgres")))]
    {
        bail!("this ravi was built without a store backend; cannot open {url} (use --store none)")
    }
}

/// Opens the SQL store at `url` itself (the audit chain's commands need more than the
/// [`Store`] interface).
#[cfg(any(feature = "store-sqlite", feature = "store-postgres"))]
pub async fn open_sql(url: &str) -> anyhow::Result<ravi_store_sql::SqlStore> {
    ravi_store_sql::SqlStore::open(url)
        .await
        .with_context(|| format!("opening the store {url}"))
}

/// The audit key ravi.toml's `[audit] key` names, if any.
#[cfg(any(feature = "store-sqlite", feature = "store-postgres"))]
pub fn audit_key(config: &RaviConfig) -> anyhow::Result<Option<ravi_store_sql::audit::AuditKey>> {
    let Some((pem, what)) = config.audit.key_pem()? else {
        return Ok(None);
    };
    let key = ravi_store_sql::audit::AuditKey::from_pem(&pem, &what)?;
    Ok(Some(key))
}

/// Signs the audit chain's checkpoints while a command runs (`[audit] key`), and once more
/// as it ends: dropping it signs what was written since the last tick.
#[derive(Debug)]
pub struct AuditSigner {
    #[cfg(any(feature = "store-sqlite", feature = "store-postgres"))]
    url: String,
    #[cfg(any(feature = "store-sqlite", feature = "store-postgres"))]
    key: Arc<ravi_store_sql::audit::AuditKey>,
    #[cfg(any(feature = "store-sqlite", feature = "store-postgres"))]
    task: Option<ravi_store_sql::audit::CheckpointTask>,
}

/// Starts signing checkpoints of the store at `url` when the config names a key. A key that
/// cannot be read stops the command here, naming the file and the key.
pub async fn start_checkpoints(
    url: &str,
    config: &RaviConfig,
) -> anyhow::Result<Option<AuditSigner>> {
    #[cfg(any(feature = "store-sqlite", feature = "store-postgres"))]
    {
        let Some(key) = audit_key(config)? else {
            return Ok(None);
        };
        let key = Arc::new(key);
        let store = open_sql(url).await?;
        let task = store.spawn_checkpoints(Arc::clone(&key), config.audit.checkpoint_every);
        Ok(Some(AuditSigner {
            url: url.to_owned(),
            key,
            task: Some(task),
        }))
    }
    #[cfg(not(any(feature = "store-sqlite", feature = "store-postgres")))]
    {
        let _ = (url, config);
        Ok(None)
    }
}

impl Drop for AuditSigner {
    fn drop(&mut self) {
        #[cfg(any(feature = "store-sqlite", feature = "store-postgres"))]
        {
            drop(self.task.take());
            // The last checkpoint, on a thread of its own with a runtime of its own: this
            // may run inside the command's runtime, or after it stopped.
            let (url, key) = (self.url.clone(), Arc::clone(&self.key));
            let last = std::thread::spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .map_err(|e| e.to_string())?;
                rt.block_on(async {
                    let store = ravi_store_sql::SqlStore::open(&url)
                        .await
                        .map_err(|e| e.to_string())?;
                    store
                        .audit_checkpoint(&key)
                        .await
                        .map_err(|e| e.to_string())
                })
            });
            if let Ok(Err(e)) = last.join() {
                tracing::warn!(error = %e, "could not sign the last audit checkpoint");
            }
        }
    }
}

/// The blob store of the durable run whose artifacts live in `scope`: files under the state
/// directory, one directory per run (a file blob store is owned by one process at a time, and
/// a run is, until it ends or dies), so the refs its journal names resolve after a restart.
pub fn blob_store(scope: &str) -> anyhow::Result<Arc<dyn BlobStore>> {
    let name: String = scope
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect();
    let dir = state_dir()?.join("artifacts").join(name);
    let store = FsBlobStore::open(&dir)
        .with_context(|| format!("opening the artifact store {}", dir.display()))?;
    Ok(Arc::new(store))
}

/// The environment variable naming the blob store when `--blobs` is not given.
pub const BLOBS_ENV: &str = "RAVI_BLOBS";

/// Which blob store to use: `--blobs URL`, else `RAVI_BLOBS`, else `[blobs] url`; `None`:
/// the default (a directory per durable run under the state directory; memory for what
/// `ravi serve` sessions make).
pub fn blobs_url(flag: Option<&str>, config: &RaviConfig) -> Option<String> {
    flag.map(str::to_owned)
        .or_else(|| {
            std::env::var(BLOBS_ENV)
                .ok()
                .filter(|v| !v.trim().is_empty())
        })
        .or_else(|| config.blobs_url.clone())
        .map(|u| u.trim().to_owned())
}

/// Opens the blob store at `url`.
pub fn open_blobs(url: &str) -> anyhow::Result<crate::blobs::OpenedBlobs> {
    crate::blobs::open(url).with_context(|| format!("opening the blob store {url}"))
}

/// The blob store of a durable run: the one `url` names, else its own directory
/// ([`blob_store`]).
pub fn run_blob_store(url: Option<&str>, scope: &str) -> anyhow::Result<Arc<dyn BlobStore>> {
    match url {
        Some(u) => Ok(open_blobs(u)?.store()),
        None => blob_store(scope),
    }
}

pub use ravi_gateway::new_run_id;
