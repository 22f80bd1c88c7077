//! # ravi-confine — the kernel's rules around the processes Ravi starts
//!
//! Approval decides *whether* a command runs; confinement decides *what it can reach*. A
//! [`Policy`] names what a process may read and write, whether it may open network sockets,
//! and its resource limits; [`Policy::prepare`] builds the kernel objects in the parent (a
//! Landlock ruleset, a seccomp program) and [`Prepared::apply`] enforces them in the child
//! between `fork` and `exec` (no allocation there: only system calls), through
//! [`confine_command`]. Well-kept crates do the work: `landlock` for the file-system and TCP
//! rules, `seccompiler` for the system-call filter, `libc` for rlimits.
//!
//! Fails closed: when the kernel lacks a feature the policy needs, [`Policy::prepare`] says
//! which, and which setting runs the process weaker (`--sandbox off`), instead of running it
//! unconfined.
//!
//! ```no_run
//! use ravi_confine::{Mode, Policy, confine_command};
//!
//! let policy = Policy::for_shell(Mode::Workspace, "/srv/ws".as_ref(), "/tmp/ravi-1".as_ref());
//! let prepared = policy.prepare().expect("this kernel has Landlock");
//! let mut cmd = std::process::Command::new("sh");
//! cmd.args(["-c", "cat ~/.ssh/id_ed25519"]); // refused: Permission denied
//! confine_command(&mut cmd, prepared);
//! let status = cmd.status().unwrap();
//! assert!(!status.success());
//! ```

use std::path::{Path, PathBuf};
use std::str::FromStr;

use landlock::{
    ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, PathBeneath, PathFd, Ruleset,
    RulesetAttr, RulesetCreated, RulesetCreatedAttr,
};
use serde::Serialize;

/// How confined a process is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum Mode {
    /// Read-write in the workspace and a private temporary folder, read-only on the system's
    /// program and library folders, nothing else; no network; limits; dangerous system calls
    /// refused. The default.
    #[default]
    Workspace,
    /// As `workspace`, but the workspace is read-only too: only the private temporary folder
    /// is writable.
    Strict,
    /// No confinement at all (explicit, logged and shown next to the tool).
    Off,
}

impl Mode {
    /// `workspace`, `strict` or `off`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Workspace => "workspace",
            Self::Strict => "strict",
            Self::Off => "off",
        }
    }
}

impl std::fmt::Display for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Mode {
    type Err = ConfineError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "workspace" => Ok(Self::Workspace),
            "strict" => Ok(Self::Strict),
            "off" => Ok(Self::Off),
            other => Err(ConfineError::BadMode(other.to_owned())),
        }
    }
}

/// Resource limits of a confined process (`setrlimit`, inherited by its children).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Limits {
    /// CPU seconds (`RLIMIT_CPU`).
    pub cpu_secs: u64,
    /// Address space in bytes (`RLIMIT_AS`).
    pub address_space_bytes: u64,
    /// Open files (`RLIMIT_NOFILE`).
    pub open_files: u64,
    /// Processes of the user (`RLIMIT_NPROC`; not enforced for root by the kernel).
    pub processes: u64,
    /// The largest file it may write, in bytes (`RLIMIT_FSIZE`).
    pub file_size_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            cpu_secs: 600,
            address_space_bytes: 8 << 30,
            open_files: 1024,
            processes: 512,
            file_size_bytes: 1 << 30,
        }
    }
}

/// The system's program and library folders a confined process may read (those that exist).
pub const SYSTEM_READ_ONLY: &[&str] = &[
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt", "/dev",
];

/// What a process may reach.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Policy {
    /// The mode this policy was made for.
    pub mode: Mode,
    /// Folders (and files) it may read and write.
    pub read_write: Vec<PathBuf>,
    /// Folders (and files) it may read and execute.
    pub read_only: Vec<PathBuf>,
    /// Whether it may open network sockets (IPv4, IPv6). Unix sockets stay allowed; connecting
    /// to abstract Unix sockets outside the sandbox is refused where the kernel can.
    pub network: bool,
    /// Its resource limits.
    pub limits: Limits,
}

impl Policy {
    /// The policy of a `shell` command under `mode`: the workspace (read-write, or read-only
    /// when strict), a private temporary folder `tmp`, the system folders read-only, no
    /// network, the default limits.
    pub fn for_shell(mode: Mode, workspace: &Path, tmp: &Path) -> Self {
        let mut read_write = vec![tmp.to_path_buf(), PathBuf::from("/dev/null")];
        let mut read_only: Vec<PathBuf> = SYSTEM_READ_ONLY.iter().map(PathBuf::from).collect();
        if mode == Mode::Strict {
            read_only.push(workspace.to_path_buf());
        } else {
            read_write.push(workspace.to_path_buf());
        }
        Self {
            mode,
            read_write,
            read_only,
            network: false,
            limits: Limits::default(),
        }
    }

    /// Builds the kernel objects in the parent. Fails, naming the missing kernel feature,
    /// when this kernel cannot enforce the policy; a policy of [`Mode::Off`] prepares nothing.
    pub fn prepare(&self) -> Result<Prepared, ConfineError> {
        if self.mode == Mode::Off {
            return Ok(Prepared {
                ruleset: None,
                filter: None,
                limits: None,
            });
        }
        let ruleset = self.ruleset()?;
        let filter = seccomp_filter(self.network)?;
        Ok(Prepared {
            ruleset: Some(ruleset),
            filter: Some(filter),
            limits: Some(self.limits),
        })
    }

    fn ruleset(&self) -> Result<RulesetCreated, ConfineError> {
        let missing = |feature: &'static str| {
            move |e: landlock::RulesetError| ConfineError::Unsupported {
                feature,
                detail: e.to_string(),
            }
        };
        let fs = AccessFs::from_all(ABI::V3);
        let mut ruleset = Ruleset::default()
            .set_compatibility(CompatLevel::HardRequirement)
            .handle_access(fs)
            .map_err(missing("Landlock file-system rules (ABI 3, Linux 6.2)"))?;
        if !self.network {
            ruleset = ruleset
                .handle_access(AccessNet::from_all(ABI::V4))
                .map_err(missing("Landlock network rules (ABI 4, Linux 6.7)"))?;
        }
        let mut created = ruleset.create().map_err(missing(
            "Landlock (Linux 5.13 with `landlock` in the LSM list)",
        ))?;
        let read = AccessFs::from_read(ABI::V3);
        for (paths, access) in [(&self.read_only, read), (&self.read_write, fs)] {
            for path in paths {
                let Ok(fd) = PathFd::new(path) else {
                    // A folder this system does not have grants nothing.
                    continue;
                };
                // A file takes only the rights that apply to files.
                let access = if path.is_dir() {
                    access
                } else {
                    access & AccessFs::from_file(ABI::V3)
                };
                created = created
                    .add_rule(PathBeneath::new(fd, access))
                    .map_err(|e| ConfineError::Rule {
                        path: path.clone(),
                        detail: e.to_string(),
                    })?;
            }
        }
        Ok(created)
    }
}

/// The system calls a confined process may not make (they answer `EPERM`): tracing other
/// processes, mounting, namespaces, kernel modules and keyrings, BPF, kexec, and the like.
pub const REFUSED_SYSCALLS: &[&str] = &[
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "mount",
    "umount2",
    "pivot_root",
    "unshare",
    "setns",
    "kexec_load",
    "kexec_file_load",
    "bpf",
    "keyctl",
    "add_key",
    "request_key",
    "init_module",
    "finit_module",
    "delete_module",
    "reboot",
    "swapon",
    "swapoff",
    "perf_event_open",
    "userfaultfd",
    "open_by_handle_at",
    "acct",
    "io_uring_setup",
];

fn syscall_number(name: &str) -> Option<i64> {
    Some(match name {
        "ptrace" => libc::SYS_ptrace,
        "process_vm_readv" => libc::SYS_process_vm_readv,
        "process_vm_writev" => libc::SYS_process_vm_writev,
        "mount" => libc::SYS_mount,
        "umount2" => libc::SYS_umount2,
        "pivot_root" => libc::SYS_pivot_root,
        "unshare" => libc::SYS_unshare,
        "setns" => libc::SYS_setns,
        "kexec_load" => libc::SYS_kexec_load,
        "kexec_file_load" => libc::SYS_kexec_file_load,
        "bpf" => libc::SYS_bpf,
        "keyctl" => libc::SYS_keyctl,
        "add_key" => libc::SYS_add_key,
        "request_key" => libc::SYS_request_key,
        "init_module" => libc::SYS_init_module,
        "finit_module" => libc::SYS_finit_module,
        "delete_module" => libc::SYS_delete_module,
        "reboot" => libc::SYS_reboot,
        "swapon" => libc::SYS_swapon,
        "swapoff" => libc::SYS_swapoff,
        "perf_event_open" => libc::SYS_perf_event_open,
        "userfaultfd" => libc::SYS_userfaultfd,
        "open_by_handle_at" => libc::SYS_open_by_handle_at,
        "acct" => libc::SYS_acct,
        "io_uring_setup" => libc::SYS_io_uring_setup,
        _ => return None,
    })
}

fn seccomp_filter(network: bool) -> Result<seccompiler::BpfProgram, ConfineError> {
    use seccompiler::{
        SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter, SeccompRule,
    };
    use std::collections::BTreeMap;
    let bad = |e: seccompiler::BackendError| ConfineError::Unsupported {
        feature: "a seccomp filter for this architecture",
        detail: e.to_string(),
    };
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = REFUSED_SYSCALLS
        .iter()
        .filter_map(|name| syscall_number(name))
        .map(|n| (n, Vec::new()))
        .collect();
    if !network {
        let family = |af: i32| -> Result<SeccompRule, ConfineError> {
            let condition = SeccompCondition::new(
                0,
                SeccompCmpArgLen::Dword,
                SeccompCmpOp::Eq,
                u64::from(af.unsigned_abs()),
            )
            .map_err(bad)?;
            SeccompRule::new(vec![condition]).map_err(bad)
        };
        rules.insert(
            libc::SYS_socket,
            vec![family(libc::AF_INET)?, family(libc::AF_INET6)?],
        );
    }
    let arch = std::env::consts::ARCH
        .try_into()
        .map_err(|e: seccompiler::BackendError| ConfineError::Unsupported {
            feature: "a seccomp filter for this architecture",
            detail: e.to_string(),
        })?;
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM.unsigned_abs()),
        arch,
    )
    .map_err(bad)?;
    filter.try_into().map_err(bad)
}

/// A policy's kernel objects, built before `fork`, enforced by [`apply`](Self::apply) in the
/// child.
pub struct Prepared {
    ruleset: Option<RulesetCreated>,
    filter: Option<seccompiler::BpfProgram>,
    limits: Option<Limits>,
}

impl std::fmt::Debug for Prepared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Prepared")
            .field("landlock", &self.ruleset.is_some())
            .field("seccomp", &self.filter.is_some())
            .field("limits", &self.limits)
            .finish()
    }
}

impl Prepared {
    /// Enforces the policy on the calling process: limits, `no_new_privs`, the Landlock
    /// ruleset, then the system-call filter. Meant for the child between `fork` and `exec`
    /// (system calls only); once applied, the process and its children cannot undo it.
    pub fn apply(&mut self) -> std::io::Result<()> {
        if let Some(limits) = self.limits {
            for (resource, value) in [
                (libc::RLIMIT_CPU, limits.cpu_secs),
                (libc::RLIMIT_AS, limits.address_space_bytes),
                (libc::RLIMIT_NOFILE, limits.open_files),
                (libc::RLIMIT_NPROC, limits.processes),
                (libc::RLIMIT_FSIZE, limits.file_size_bytes),
            ] {
                let limit = libc::rlimit {
                    rlim_cur: value,
                    rlim_max: value,
                };
                // SAFETY: setrlimit reads the struct it is given and nothing else.
                #[expect(unsafe_code, reason = "setrlimit has no safe wrapper in libc")]
                let rc = unsafe { libc::setrlimit(resource, &limit) };
                if rc != 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
        }
        if let Some(ruleset) = self.ruleset.take() {
            ruleset
                .restrict_self()
                .map_err(|e| std::io::Error::new(std::io::ErrorKind::PermissionDenied, e))?;
        }
        if let Some(filter) = &self.filter {
            seccompiler::apply_filter(filter)
                .map_err(|e| std::io::Error::new(std::io::ErrorKind::PermissionDenied, e))?;
        }
        Ok(())
    }
}

/// Makes `cmd` apply `prepared` in its child before `exec`.
pub fn confine_command(cmd: &mut std::process::Command, prepared: Prepared) {
    use std::os::unix::process::CommandExt as _;
    let mut prepared = prepared;
    // SAFETY: the closure runs in the child after fork; it only makes system calls (setrlimit,
    // prctl, landlock_restrict_self, seccomp) on objects built before the fork.
    #[expect(
        unsafe_code,
        reason = "pre_exec is how a child is confined before exec"
    )]
    unsafe {
        cmd.pre_exec(move || prepared.apply());
    }
}

/// Makes the tokio `cmd` apply `prepared` in its child before `exec`.
pub fn confine_tokio_command(cmd: &mut tokio::process::Command, prepared: Prepared) {
    let mut prepared = prepared;
    // SAFETY: as in `confine_command`: system calls only, on objects built before the fork.
    #[expect(
        unsafe_code,
        reason = "pre_exec is how a child is confined before exec"
    )]
    unsafe {
        cmd.pre_exec(move || prepared.apply());
    }
}

/// Why a policy could not be prepared.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfineError {
    /// The kernel lacks a feature the policy needs.
    #[error(
        "this kernel cannot confine the process: it lacks {feature} ({detail}); run it \
         unconfined on purpose with --sandbox off (or `mode = \"off\"` in ravi.toml's \
         [sandbox] tables)"
    )]
    Unsupported {
        /// The feature.
        feature: &'static str,
        /// What the kernel answered.
        detail: String,
    },
    /// A path of the policy could not be added.
    #[error("the sandbox rule for {path} could not be added: {detail}")]
    Rule {
        /// The path.
        path: PathBuf,
        /// Why.
        detail: String,
    },
    /// A mode name that is none of the three.
    #[error("unknown sandbox mode `{0}`: expected strict, workspace or off")]
    BadMode(String),
}
