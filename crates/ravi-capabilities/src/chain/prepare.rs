//! Turns the guest's wasm module into what a run starts from, once per build: boots the
//! interpreter inside it with wizer (so every run starts from a snapshot, its modules already
//! imported) and precompiles the snapshot with the very engine that will load it (so no run
//! pays for Cranelift). The result is cached as a file beside the build's other artefacts,
//! named by the guest's key and the engine's compatibility hash; a file lock makes concurrent
//! first runs (parallel tests, several replicas on one disk) prepare it once.
//!
//! This used to happen at build time, in a helper binary with wasmtime and Cranelift of its
//! own — a second wasmtime build that a new user's first `cargo run` waited minutes for. The
//! host already has wasmtime; with Cranelift in it, the first run prepares the guest in
//! seconds instead.
//!
//! The CPython engine's preparation (`cpython_prepare.rs`) is made of the same parts: [`once`]
//! (the lock and the check before and after taking it), [`write_aside`], [`engine_hash`],
//! [`block_on_own_thread`] and [`wizer_snapshot`].

use std::hash::{Hash, Hasher};
use std::io::Write;
use std::path::{Path, PathBuf};

use wasmtime::{Engine, Instance, Linker, Module, Store};
use wasmtime_wasi::WasiCtxBuilder;
use wasmtime_wasi::p1::WasiP1Ctx;

use super::SandboxError;
use super::wizer_state::Snapshot;

/// The guest's pre-initialisation entry point (exported by `ravi-sandbox-guest`).
const INIT_FUNC: &str = "wizer.initialize";

/// Where the precompiled guest for `engine` is cached: `<dir>/ravi-guest-<key>-<engine>.cwasm`,
/// `key` naming the guest's sources and `engine` the code-generation settings a `.cwasm`
/// must match to load ([`engine_hash`]).
pub(super) fn cached_path(dir: &Path, key: &str, engine: &Engine) -> PathBuf {
    dir.join(format!("ravi-guest-{key}-{}.cwasm", engine_hash(engine)))
}

/// wasmtime's own compatibility hash of `engine` (its version, target, code-generation flags
/// and tunables: what a `.cwasm` must match to load), as 16 hex digits for a cached file's name.
pub(super) fn engine_hash(engine: &Engine) -> String {
    // `DefaultHasher::new` is the same in every process of one build of the host (and, in
    // practice, of every build with one toolchain); a hasher that changed with the toolchain
    // would only make a cache shared by several builds miss once.
    let mut h = std::hash::DefaultHasher::new();
    engine.precompile_compatibility_hash().hash(&mut h);
    format!("{:016x}", h.finish())
}

/// Makes sure `cwasm` exists: when it does not, snapshots `wasm` and precompiles it with
/// `engine` into it. Concurrent callers (threads or processes) wait on a lock file beside it,
/// and the file appears whole or not at all (written aside, then renamed).
pub(super) fn ensure(engine: &Engine, wasm: &Path, cwasm: &Path) -> Result<(), SandboxError> {
    let fail = |reason: String| SandboxError::GuestPreparation {
        wasm: wasm.to_path_buf(),
        reason,
    };
    let dir = cwasm
        .parent()
        .ok_or_else(|| fail(format!("{} has no parent folder", cwasm.display())))?;
    once(cwasm, &dir.join("ravi-guest.lock"), || {
        let bytes = std::fs::read(wasm).map_err(|e| format!("reading it: {e}"))?;
        tracing::info!(
            wasm = %wasm.display(),
            "preparing the code-mode guest (once per build: snapshot and precompile)"
        );
        let started = std::time::Instant::now();
        let snapshot =
            block_on_own_thread(|| snapshot(&bytes)).map_err(|e| format!("snapshot: {e:#}"))?;
        let compiled = engine
            .precompile_module(&snapshot)
            .map_err(|e| format!("precompiling: {e:#}"))?;
        write_aside(cwasm, &compiled)?;
        tracing::info!(
            cwasm = %cwasm.display(),
            bytes = compiled.len(),
            seconds = started.elapsed().as_secs_f64(),
            "code-mode guest prepared"
        );
        Ok(())
    })
    .map_err(fail)
}

/// Runs `make` unless `done` exists, holding the lock file `lock` meanwhile (its folder is
/// created): concurrent callers, threads or processes, wait for the first and then find `done`
/// there. `make` must create `done` last and whole ([`write_aside`]), so that its existence
/// means all of the work is there; a `make` that failed part-way is simply run again by the
/// next caller. Its error is returned as is; a failure to take the lock names the lock file.
pub(super) fn once(
    done: &Path,
    lock: &Path,
    make: impl FnOnce() -> Result<(), String>,
) -> Result<(), String> {
    if done.is_file() {
        return Ok(());
    }
    if let Some(dir) = lock.parent() {
        std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    }
    let file =
        std::fs::File::create(lock).map_err(|e| format!("creating {}: {e}", lock.display()))?;
    file.lock()
        .map_err(|e| format!("locking {}: {e}", lock.display()))?;
    // Whoever held the lock before may have made it.
    let made = if done.is_file() { Ok(()) } else { make() };
    drop(file);
    made
}

/// Writes `data` to `path` whole or not at all: into a file beside it, unique to this process
/// (`<name>.<pid>.tmp`), synced, then renamed into place. The aside file does not outlive a
/// failure.
pub(super) fn write_aside(path: &Path, data: &[u8]) -> Result<(), String> {
    let mut name = path.file_name().map(ToOwned::to_owned).unwrap_or_default();
    name.push(format!(".{}.tmp", std::process::id()));
    let tmp = path.with_file_name(name);
    let written = std::fs::File::create(&tmp).and_then(|mut f| {
        f.write_all(data)?;
        f.sync_all()
    });
    let placed = written
        .map_err(|e| format!("writing {}: {e}", tmp.display()))
        .and_then(|()| {
            std::fs::rename(&tmp, path)
                .map_err(|e| format!("renaming {} to {}: {e}", tmp.display(), path.display()))
        });
    if placed.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    placed
}

/// Runs the future `make` returns on a runtime of its own, on a thread of its own: callers may
/// be inside an async runtime (a server loading its sandbox lazily), where blocking on another
/// one panics.
pub(super) fn block_on_own_thread<T, F>(make: impl FnOnce() -> F + Send) -> wasmtime::Result<T>
where
    F: Future<Output = wasmtime::Result<T>>,
    T: Send,
{
    std::thread::scope(|s| {
        s.spawn(|| {
            let rt = tokio::runtime::Builder::new_current_thread().build()?;
            rt.block_on(make())
        })
        .join()
        .unwrap_or_else(|_| Err(wasmtime::format_err!("the snapshot thread panicked")))
    })
}

/// Snapshots `wasm` with `wizer`: instruments it, instantiates it in `store` through `linker`,
/// lets `boot` initialise the instance, and returns the module whose initial state is the
/// memory and globals `boot` left behind.
pub(super) async fn wizer_snapshot<T: Send + 'static>(
    wizer: &wasmtime_wizer::Wizer,
    store: &mut Store<T>,
    linker: &Linker<T>,
    wasm: &[u8],
    boot: impl AsyncFnOnce(&mut Store<T>, Instance) -> wasmtime::Result<()>,
) -> wasmtime::Result<Vec<u8>> {
    // wizer's own wasmtime adapter (its `wasmtime` feature) would turn on wasmtime's cache,
    // gc, threads, wave and wit-parser features, which Ravi does not use and which cost a
    // first build minutes; the adapter is these few lines.
    let (cx, instrumented) = wizer.instrument(wasm)?;
    let module = Module::new(store.engine(), &instrumented)?;
    let instance = linker.instantiate_async(&mut *store, &module).await?;
    boot(&mut *store, instance).await?;
    let mut state = Snapshot::new(store, instance);
    let snapshot = wizer.snapshot(&cx, &mut state).await?;
    state.finish(snapshot)
}

/// Runs the guest's boot (`_initialize`, then [`INIT_FUNC`]) once and returns the module with
/// the memory and globals it left behind as its initial state.
async fn snapshot(wasm: &[u8]) -> wasmtime::Result<Vec<u8>> {
    // This engine only runs the boot once, and only the memory it leaves behind is kept:
    // unoptimised code compiles in a fraction of the time and the snapshot is the same.
    let mut config = wasmtime::Config::new();
    config.cranelift_opt_level(wasmtime::OptLevel::None);
    let engine = Engine::new(&config)?;
    let wasi = WasiCtxBuilder::new().build_p1();
    let mut store = Store::new(&engine, wasi);
    let mut linker: Linker<WasiP1Ctx> = Linker::new(&engine);
    wasmtime_wasi::p1::add_to_linker_async(&mut linker, |cx| cx)?;
    // The bridge is never called while booting; these stand-ins make that an error.
    linker.func_wrap(
        super::abi::IMPORT_MODULE,
        super::abi::HOST_CALL,
        |_: i32, _: i32, _: i32| -> wasmtime::Result<i64> {
            Err(wasmtime::format_err!(
                "the host bridge is not available during pre-initialisation"
            ))
        },
    )?;
    linker.func_wrap(
        super::abi::IMPORT_MODULE,
        super::abi::HOST_TAKE,
        |_: i32| -> wasmtime::Result<()> {
            Err(wasmtime::format_err!(
                "the host bridge is not available during pre-initialisation"
            ))
        },
    )?;
    let mut wizer = wasmtime_wizer::Wizer::new();
    wizer.init_func(INIT_FUNC);
    let boot = async |store: &mut Store<WasiP1Ctx>, instance: Instance| {
        for name in ["_initialize", INIT_FUNC] {
            if let Ok(init) = instance.get_typed_func::<(), ()>(&mut *store, name) {
                init.call_async(&mut *store, ())
                    .await
                    .map_err(|e| e.context(format!("the guest's `{name}` trapped")))?;
            } else if name == INIT_FUNC {
                wasmtime::bail!("the guest does not export `{INIT_FUNC}`");
            }
        }
        Ok(())
    };
    wizer_snapshot(&wizer, &mut store, &linker, wasm, boot).await
}

#[cfg(test)]
mod tests {
    #![allow(
        clippy::unwrap_used,
        clippy::expect_used,
        reason = "tests: a failed unwrap is a failed test"
    )]

    use super::*;

    /// A module whose `wizer.initialize` sets its exported mutable global `g` (0 at start) to
    /// 42: a snapshot taken after it must start with 42.
    const TINY: &[u8] = &[
        0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, // magic, version
        0x01, 0x04, 0x01, 0x60, 0x00, 0x00, // types: () -> ()
        0x03, 0x02, 0x01, 0x00, // functions: one of type 0
        0x05, 0x03, 0x01, 0x00, 0x01, // memory: one page
        0x06, 0x06, 0x01, 0x7f, 0x01, 0x41, 0x00, 0x0b, // global: mut i32 = 0
        0x07, 0x21, 0x03, // exports: three
        0x01, b'g', 0x03, 0x00, // "g": global 0
        0x10, b'w', b'i', b'z', b'e', b'r', b'.', b'i', b'n', b'i', b't', b'i', b'a', b'l', b'i',
        b'z', b'e', 0x00, 0x00, // "wizer.initialize": func 0
        0x06, b'm', b'e', b'm', b'o', b'r', b'y', 0x02, 0x00, // "memory": memory 0
        0x0a, 0x08, 0x01, 0x06, 0x00, 0x41, 0x2a, 0x24, 0x00, 0x0b, // code: g = 42
    ];

    fn engine() -> Engine {
        Engine::new(&wasmtime::Config::new()).unwrap()
    }

    #[test]
    fn concurrent_first_uses_prepare_one_snapshot_that_starts_initialised() {
        let dir = tempfile::tempdir().unwrap();
        let wasm = dir.path().join("tiny.wasm");
        std::fs::write(&wasm, TINY).unwrap();
        let engine = engine();
        let cwasm = cached_path(&dir.path().join("cache"), "0123456789abcdef", &engine);
        std::thread::scope(|s| {
            let workers: Vec<_> = (0..4)
                .map(|_| s.spawn(|| ensure(&engine, &wasm, &cwasm)))
                .collect();
            for w in workers {
                w.join().unwrap().unwrap();
            }
        });
        // One prepared file and the lock, nothing left aside.
        let mut names: Vec<String> = std::fs::read_dir(dir.path().join("cache"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(names.len(), 2, "{names:?}");
        assert!(
            names[0].starts_with("ravi-guest-0123456789abcdef-"),
            "{names:?}"
        );
        assert_eq!(names[1], "ravi-guest.lock");

        let module = super::super::guest::load_module(&engine, &cwasm).unwrap();
        let mut store = Store::new(&engine, ());
        let instance = wasmtime::Instance::new(&mut store, &module, &[]).unwrap();
        let g = instance.get_global(&mut store, "g").unwrap();
        assert_eq!(g.get(&mut store).i32(), Some(42));
    }

    #[test]
    fn the_cache_name_follows_the_engine_settings() {
        let dir = Path::new("/cache");
        let a = cached_path(dir, "k", &engine());
        assert_eq!(
            a,
            cached_path(dir, "k", &engine()),
            "stable for one setting"
        );
        let mut other = wasmtime::Config::new();
        other.cranelift_opt_level(wasmtime::OptLevel::None);
        let b = cached_path(dir, "k", &Engine::new(&other).unwrap());
        assert_ne!(a, b, "another code generation, another file");
        assert_ne!(
            a,
            cached_path(dir, "j", &engine()),
            "another guest, another file"
        );
    }

    #[test]
    fn a_write_aside_that_fails_leaves_nothing_behind() {
        let dir = tempfile::tempdir().unwrap();
        let err = write_aside(&dir.path().join("missing/x.bin"), b"data").unwrap_err();
        assert!(err.contains("x.bin") && err.contains("writing"), "{err}");
        // Renaming onto a folder that is not empty fails after the write.
        let target = dir.path().join("d");
        std::fs::create_dir_all(target.join("inner")).unwrap();
        let err = write_aside(&target, b"data").unwrap_err();
        assert!(err.contains("renaming"), "{err}");
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["d"], "no aside file left");
        write_aside(&target.join("inner/ok.bin"), b"data").unwrap();
        assert_eq!(std::fs::read(target.join("inner/ok.bin")).unwrap(), b"data");
    }

    #[test]
    fn a_missing_or_broken_module_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let engine = engine();
        let cwasm = dir.path().join("out.cwasm");
        let missing = dir.path().join("nowhere.wasm");
        let err = ensure(&engine, &missing, &cwasm).unwrap_err();
        assert!(
            matches!(&err, SandboxError::GuestPreparation { wasm, reason }
                if wasm == &missing && reason.contains("reading it")),
            "{err}"
        );
        assert!(err.to_string().contains("nowhere.wasm"), "{err}");

        let broken = dir.path().join("broken.wasm");
        std::fs::write(&broken, b"not wasm").unwrap();
        let err = ensure(&engine, &broken, &cwasm).unwrap_err();
        assert!(err.to_string().contains("broken.wasm"), "{err}");
        assert!(err.to_string().contains("snapshot"), "{err}");
        assert!(!cwasm.exists(), "nothing half-written");

        // A module without the entry point is refused the same way.
        let bare = dir.path().join("bare.wasm");
        std::fs::write(&bare, &TINY[..8]).unwrap();
        let err = ensure(&engine, &bare, &cwasm).unwrap_err();
        assert!(err.to_string().contains("wizer.initialize"), "{err}");
        assert!(!cwasm.exists());
    }
}
