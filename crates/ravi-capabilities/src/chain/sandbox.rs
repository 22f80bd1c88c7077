//! The wasmtime sandbox: one precompiled, pre-initialised Python guest, a fresh isolated
//! instance per run.
//!
//! Per run: take a pool slot → new store (WASI with no preopens, no env, no args, stdout and
//! stderr into capped in-memory pipes; a memory limiter; an epoch deadline) → instantiate
//! from the copy-on-write snapshot → write the [`RunRequest`] into guest memory → `ravi_run`,
//! answering the guest's bridge requests ([`super::abi`]) asynchronously → map the [`Finish`]
//! record or the trap to a [`SandboxRun`].

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use ravi_kernel::CancellationToken;
use tokio::sync::Semaphore;
use wasmtime::{Caller, Engine, InstancePre, Linker, Store, UpdateDeadline};
use wasmtime_wasi::WasiCtxBuilder;
use wasmtime_wasi::p2::pipe::MemoryInputPipe;

use super::abi::{self};
use super::bridge::ToolBridge;
use super::cpython;
use super::engine_config::{MAX_GUEST_MEMORY_BYTES, engine_config};
use super::live::Sessions;
use super::prepare;
use super::{SandboxError, cpython::CpythonConfig};

use super::guest::*;

/// Sizing of a [`Sandbox`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxConfig {
    /// A precompiled guest to load. `None` (the default unless `RAVI_GUEST_CWASM` is set)
    /// loads the guest this build was made with, prepared on first use (see
    /// [`prepared_guest`]).
    pub cwasm: Option<PathBuf>,
    /// How many runs may be live at once (pool slots); further runs wait for a slot.
    pub max_concurrent_runs: u32,
}

impl Default for SandboxConfig {
    fn default() -> Self {
        Self {
            cwasm: std::env::var_os("RAVI_GUEST_CWASM").map(PathBuf::from),
            max_concurrent_runs: 256,
        }
    }
}

/// The precompiled guest this build was made with, for an engine of the default settings:
/// `$RAVI_GUEST_CWASM` when set, otherwise the cached one, prepared first if it is not there
/// yet (a snapshot of the interpreter's boot, precompiled; tens of seconds, once per build).
/// [`Sandbox::load`] does the same; this is for tools that want the file itself.
pub fn prepared_guest() -> Result<PathBuf, SandboxError> {
    if let Some(path) = std::env::var_os("RAVI_GUEST_CWASM") {
        return Ok(PathBuf::from(path));
    }
    let engine = Engine::new(&engine_config(None)).map_err(SandboxError::engine)?;
    build_guest(&engine)
}

/// The build's own guest, prepared for `engine` (cached per engine settings).
fn build_guest(engine: &Engine) -> Result<PathBuf, SandboxError> {
    if let Some(prebuilt) = ravi_sandbox_artifact::PREBUILT_CWASM {
        return Ok(PathBuf::from(prebuilt));
    }
    let cwasm = prepare::cached_path(
        Path::new(ravi_sandbox_artifact::CACHE_DIR),
        ravi_sandbox_artifact::GUEST_KEY,
        engine,
    );
    prepare::ensure(engine, Path::new(ravi_sandbox_artifact::GUEST_WASM), &cwasm)?;
    Ok(cwasm)
}

/// The engine, the loaded guest and the epoch ticker. Load once, share, run many times.
pub struct Sandbox {
    kind: PythonEngine,
    /// The CPython engine's stdlib folder, preopened read-only in every run.
    lib_dir: Option<PathBuf>,
    /// The largest linear memory the engine allows any run.
    memory_max: usize,
    engine: Engine,
    pre: InstancePre<RunState>,
    slots: Arc<Semaphore>,
    ticker_stop: Arc<AtomicBool>,
    /// The live interpreter sessions (CPython engine).
    sessions: Sessions,
}

impl std::fmt::Debug for Sandbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sandbox")
            .field("engine", &self.kind)
            .field("free_slots", &self.slots.available_permits())
            .finish_non_exhaustive()
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        self.ticker_stop.store(true, Ordering::Relaxed);
    }
}

static SHARED: OnceLock<Result<Arc<Sandbox>, SandboxError>> = OnceLock::new();

impl Sandbox {
    /// The process-wide sandbox with the default configuration, loaded on first use.
    pub fn shared() -> Result<Arc<Sandbox>, SandboxError> {
        SHARED
            .get_or_init(|| Sandbox::load(&SandboxConfig::default()).map(Arc::new))
            .clone()
    }

    /// Loads the precompiled guest and starts the epoch ticker.
    pub fn load(config: &SandboxConfig) -> Result<Self, SandboxError> {
        let slots = config.max_concurrent_runs.max(1);
        let engine = Engine::new(&engine_config(Some(slots))).map_err(SandboxError::engine)?;
        let cwasm = match &config.cwasm {
            Some(path) => path.clone(),
            None => build_guest(&engine)?,
        };
        let module = load_module(&engine, &cwasm)?;
        let mut linker: Linker<RunState> = Linker::new(&engine);
        wasmtime_wasi::p1::add_to_linker_async(&mut linker, |s: &mut RunState| &mut s.wasi)
            .map_err(SandboxError::engine)?;
        linker
            .func_wrap_async(
                abi::IMPORT_MODULE,
                abi::HOST_CALL,
                |caller: Caller<'_, RunState>, (op, ptr, len): (i32, i32, i32)| {
                    Box::new(host_call(caller, op, ptr, len))
                },
            )
            .map_err(SandboxError::engine)?;
        linker
            .func_wrap(abi::IMPORT_MODULE, abi::HOST_TAKE, host_take)
            .map_err(SandboxError::engine)?;
        let pre = linker
            .instantiate_pre(&module)
            .map_err(SandboxError::engine)?;
        let ticker_stop = Arc::new(AtomicBool::new(false));
        spawn_ticker(engine.clone(), ticker_stop.clone());
        Ok(Self {
            kind: PythonEngine::RustPython,
            lib_dir: None,
            memory_max: MAX_GUEST_MEMORY_BYTES,
            engine,
            pre,
            slots: Arc::new(Semaphore::new(slots as usize)),
            ticker_stop,
            sessions: Sessions::new(),
        })
    }

    /// Loads the CPython engine's artefacts (see [`CpythonConfig`]) and starts the epoch
    /// ticker. Needs the `code-mode-cpython` feature (without it:
    /// [`SandboxError::EngineUnavailable`]).
    pub fn load_cpython(config: &CpythonConfig) -> Result<Self, SandboxError> {
        #[cfg(feature = "code-mode-cpython")]
        {
            let (engine, pre, lib, memory_max) = cpython::load(config)?;
            let ticker_stop = Arc::new(AtomicBool::new(false));
            spawn_ticker(engine.clone(), ticker_stop.clone());
            Ok(Self {
                kind: PythonEngine::CPython,
                lib_dir: Some(lib),
                memory_max,
                engine,
                pre,
                slots: Arc::new(Semaphore::new(config.max_concurrent_runs.max(1) as usize)),
                ticker_stop,
                sessions: Sessions::new(),
            })
        }
        #[cfg(not(feature = "code-mode-cpython"))]
        {
            let _ = config;
            Err(SandboxError::EngineUnavailable)
        }
    }

    /// The process-wide sandbox of `engine`, loaded on first use. The CPython engine is
    /// [`SandboxError::EngineUnavailable`] in a build without the `code-mode-cpython` feature.
    pub fn shared_for(engine: PythonEngine) -> Result<Arc<Sandbox>, SandboxError> {
        match engine {
            PythonEngine::RustPython => Self::shared(),
            PythonEngine::CPython => cpython_shared(),
        }
    }

    /// Which Python this sandbox runs.
    pub fn engine(&self) -> PythonEngine {
        self.kind
    }

    /// Runs `script` in a fresh instance with `tools` bound as globals, each call going
    /// through `bridge`. Never fails: every problem becomes the run's status and error.
    pub async fn run(
        &self,
        script: &str,
        filename: &str,
        tools: &[ToolBinding],
        bridge: Arc<dyn ToolBridge>,
        limits: &SandboxLimits,
        cancel: Option<CancellationToken>,
    ) -> SandboxRun {
        self.run_seeded(script, filename, tools, bridge, limits, cancel, None)
            .await
    }

    /// [`run`](Self::run) with the guest's randomness (Python's `random`, `os.urandom`,
    /// `uuid4`, `secrets`) drawn from a generator seeded with `seed` instead of fresh entropy:
    /// a durable run replayed with its seed makes the same choices, so the same calls. A
    /// seeded run's randomness is predictable to whoever knows the seed.
    #[allow(
        clippy::too_many_arguments,
        reason = "each argument is a distinct input of the run; a parameter struct is future work (docs/architecture.md)"
    )]
    pub async fn run_seeded(
        &self,
        script: &str,
        filename: &str,
        tools: &[ToolBinding],
        bridge: Arc<dyn ToolBridge>,
        limits: &SandboxLimits,
        cancel: Option<CancellationToken>,
        seed: Option<u64>,
    ) -> SandboxRun {
        let started = Instant::now();
        let deadline = started + limits.timeout;
        let cancel = cancel.unwrap_or_default();
        self.sessions.sweep();
        let Ok(_permit) = self.slots.acquire().await else {
            return failed_run(started, "RaviSandboxError", "the sandbox is shutting down");
        };
        let request = match encode_request(script, filename, tools) {
            Ok(r) => r,
            Err(e) => return failed_run(started, "RaviSandboxError", &e),
        };
        let pipes = Pipes::new(limits.output_bytes);
        let mut store = match self.new_store(limits, bridge, &cancel, deadline, seed, &pipes) {
            Ok(s) => s,
            Err(e) => return failed_run(started, "RaviSandboxError", &e),
        };
        let exec = execute(self.kind, &self.pre, &mut store, request);
        let outcome = drive(exec, deadline, &cancel).await;
        conclude(&mut store, outcome, &pipes, limits, started)
    }

    /// A store for one run (or one interpreter session): WASI with no preopens but the CPython
    /// engine's read-only stdlib, no env, stdout and stderr into `pipes`; the memory limiter;
    /// the epoch deadline.
    pub(super) fn new_store(
        &self,
        limits: &SandboxLimits,
        bridge: Arc<dyn ToolBridge>,
        cancel: &CancellationToken,
        deadline: Instant,
        seed: Option<u64>,
        pipes: &Pipes,
    ) -> Result<Store<RunState>, String> {
        let mut wasi = WasiCtxBuilder::new();
        wasi.stdin(MemoryInputPipe::new(Vec::<u8>::new()))
            .stdout(pipes.stdout.clone())
            .stderr(pipes.stderr.clone())
            .wall_clock(CoarseWallClock)
            .monotonic_clock(CoarseMonotonicClock(Instant::now()));
        if let Some(lib) = &self.lib_dir {
            cpython::cpython_wasi(&mut wasi, lib)?;
        }
        if let Some(seed) = seed {
            use rand_wasi::SeedableRng as _;
            wasi.secure_random(rand_wasi::rngs::StdRng::seed_from_u64(seed))
                .insecure_random(rand_wasi::rngs::StdRng::seed_from_u64(!seed))
                .insecure_random_seed(u128::from(seed));
        }
        let state = RunState {
            wasi: wasi.build_p1(),
            limiter: Limiter {
                memory_cap: limits.memory_bytes,
                memory_max: self.memory_max,
                initial_is_free: self.kind == PythonEngine::CPython,
                base: 0,
                memory_refused: false,
            },
            bridge,
            pending: Vec::new(),
            finish: None,
            deadline,
            cancel: cancel.clone(),
            memory: None,
            request: None,
            files: Vec::new(),
            files_left_out: Vec::new(),
        };
        let mut store = Store::new(&self.engine, state);
        store.limiter(|s| &mut s.limiter);
        store.set_epoch_deadline(1);
        store.epoch_deadline_callback(|ctx| match ctx.data().interrupted() {
            Some(why) => Err(wasmtime::Error::new(why)),
            None => Ok(UpdateDeadline::Yield(1)),
        });
        Ok(store)
    }

    /// The live interpreter sessions.
    pub(super) fn sessions(&self) -> &Sessions {
        &self.sessions
    }

    /// The loaded module, ready to instantiate.
    pub(super) fn instance_pre(&self) -> &InstancePre<RunState> {
        &self.pre
    }

    /// A pool slot for a run or a session, held until dropped.
    pub(super) async fn slot(&self) -> Option<tokio::sync::OwnedSemaphorePermit> {
        self.slots.clone().acquire_owned().await.ok()
    }
}
async fn execute(
    kind: PythonEngine,
    pre: &InstancePre<RunState>,
    store: &mut Store<RunState>,
    request: Vec<u8>,
) -> wasmtime::Result<()> {
    if kind == PythonEngine::CPython {
        // The guest asks for the request through its door.
        store.data_mut().request = Some(request);
        return cpython::execute_turn(pre, store, cpython::CPYTHON_TURN).await;
    }
    let instance = pre.instantiate_async(&mut *store).await?;
    let alloc = instance.get_typed_func::<i32, i32>(&mut *store, abi::EXPORT_ALLOC)?;
    let run = instance.get_typed_func::<(i32, i32), i32>(&mut *store, abi::EXPORT_RUN)?;
    let memory = instance
        .get_memory(&mut *store, "memory")
        .ok_or_else(|| wasmtime::format_err!("the guest exports no memory"))?;
    let len = i32::try_from(request.len())
        .map_err(|_| wasmtime::format_err!("the script is too large"))?;
    let ptr = alloc.call_async(&mut *store, len).await?;
    memory.write(&mut *store, usize::try_from(ptr)?, &request)?;
    run.call_async(&mut *store, (ptr, len)).await?;
    Ok(())
}

/// The process-wide CPython sandbox (the engine of the default folder), loaded on first use.
#[cfg(feature = "code-mode-cpython")]
fn cpython_shared() -> Result<Arc<Sandbox>, SandboxError> {
    static CPYTHON: OnceLock<Result<Arc<Sandbox>, SandboxError>> = OnceLock::new();
    CPYTHON
        .get_or_init(|| {
            let dir = cpython::default_cpython_dir()?;
            Sandbox::load_cpython(&CpythonConfig::new(dir)).map(Arc::new)
        })
        .clone()
}

/// Without the `code-mode-cpython` feature there is no CPython engine.
#[cfg(not(feature = "code-mode-cpython"))]
fn cpython_shared() -> Result<Arc<Sandbox>, SandboxError> {
    Err(SandboxError::EngineUnavailable)
}
