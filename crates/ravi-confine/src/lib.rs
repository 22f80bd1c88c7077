//! # ravi-confine — the kernel's rules around the processes Ravi starts
//!
//! Approval decides *whether* a command runs; confinement decides *what it can reach*. A
//! [`Policy`] names what a process may read and write, what network it may reach, and its
//! resource limits. [`Policy::prepare`] builds the kernel objects in the parent (a Landlock
//! ruleset, a seccomp program, a pids cgroup, a socket pair for a private network namespace);
//! [`confine_command`] (or [`confine_tokio_command`]) makes the child enforce them between
//! `fork` and `exec` (system calls only, no allocation), and returns the [`Confined`] guard
//! that starts the egress proxy after the spawn and kills whatever is left of the process
//! tree when dropped. Well-kept crates do the standard work: `landlock` for the file-system and
//! TCP rules, `seccompiler` for the system-call filter, `libc` for rlimits.
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
//! let confined = confine_command(&mut cmd, prepared);
//! let status = cmd.status().unwrap();
//! assert!(!status.success());
//! drop(confined); // kills what the command left running
//! ```

mod cgroup;
pub mod egress;
mod netns;
mod seccomp;

use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;

use landlock::{
    ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, PathBeneath, PathFd, Ruleset,
    RulesetAttr, RulesetCreated, RulesetCreatedAttr,
};
use serde::{Deserialize, Serialize};

pub use netns::PROXY_PORT;
pub use seccomp::REFUSED_SYSCALLS;

/// How confined a process is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum Mode {
    /// Read-write in the workspace (for an MCP server: the folders named in its arguments)
    /// and a private temporary folder, read-only on the system's program and library
    /// folders, nothing else; no network unless granted; limits; dangerous system calls
    /// refused. The default.
    #[default]
    Workspace,
    /// As `workspace`, but the workspace (the server's folders) is read-only too: only the
    /// private temporary folder is writable.
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

/// Resource limits of a confined process (inherited by its children). `0` means no limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Limits {
    /// CPU seconds (`RLIMIT_CPU`).
    pub cpu_secs: u64,
    /// Address space in bytes (`RLIMIT_AS`).
    pub address_space_bytes: u64,
    /// Open files (`RLIMIT_NOFILE`).
    pub open_files: u64,
    /// Processes of the tree: a pids cgroup where Ravi may make one (it binds root too),
    /// else `RLIMIT_NPROC` (which binds the user's processes, and not root).
    pub processes: u64,
    /// The largest file it may write, in bytes (`RLIMIT_FSIZE`).
    pub file_size_bytes: u64,
}

impl Default for Limits {
    /// The limits of a shell command.
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

impl Limits {
    /// The limits of a stdio MCP server: it lives as long as its connection, so no CPU-time
    /// bound, and no address-space bound (JavaScript engines reserve far more than they use).
    pub fn server() -> Self {
        Self {
            cpu_secs: 0,
            address_space_bytes: 0,
            open_files: 4096,
            ..Self::default()
        }
    }
}

/// The system's program and library folders a confined process may read (those that exist).
/// Of [`FILTERED`] folders, only what every user of the system may read is granted.
pub const SYSTEM_READ_ONLY: &[&str] = &[
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt", "/dev",
];

/// System folders granted entry by entry: a file or folder other users may not read
/// (`/etc/shadow`, `/etc/ssl/private`, raw disks in `/dev`) is left out, so that a process
/// running as root does not read it either.
pub const FILTERED: &[&str] = &["/etc", "/dev", "/opt"];

/// How deep [`FILTERED`] folders are walked for what others may not read.
const FILTER_DEPTH: usize = 4;

/// A granted path, opened once for every policy of this process.
struct Grant {
    path: PathBuf,
    fd: PathFd,
    dir: bool,
}

/// The grants of a [`FILTERED`] folder (or of any system folder), opened once per process:
/// `None` for a path outside [`SYSTEM_READ_ONLY`].
fn system_grants(path: &Path) -> Option<&'static [Grant]> {
    static CACHE: std::sync::OnceLock<Vec<(PathBuf, Vec<Grant>)>> = std::sync::OnceLock::new();
    let cache = CACHE.get_or_init(|| {
        SYSTEM_READ_ONLY
            .iter()
            .map(|root| {
                let root = PathBuf::from(root);
                let paths = if FILTERED.iter().any(|f| Path::new(f) == root) {
                    readable_tree(&root, FILTER_DEPTH).0
                } else {
                    vec![root.clone()]
                };
                let grants = paths
                    .into_iter()
                    .filter_map(|path| {
                        let fd = PathFd::new(&path).ok()?;
                        let dir = path.is_dir();
                        Some(Grant { path, fd, dir })
                    })
                    .collect();
                (root, grants)
            })
            .collect()
    });
    cache
        .iter()
        .find(|(root, _)| root == path)
        .map(|(_, grants)| grants.as_slice())
}

/// What of `path` every user may read: `path` itself when all of it is, else its parts that
/// are (walked `depth` levels down). Returns the grants and whether all of `path` was.
fn readable_tree(path: &Path, depth: usize) -> (Vec<PathBuf>, bool) {
    use std::os::unix::fs::PermissionsExt as _;
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return (Vec::new(), false);
    };
    // A link grants nothing by itself (its target is judged where it lies); one to a
    // non-file (`/dev/stderr` → a pipe) could not take a rule anyway.
    if meta.file_type().is_symlink() {
        return (Vec::new(), true);
    }
    use std::os::unix::fs::FileTypeExt as _;
    let kind = meta.file_type();
    if !(kind.is_dir() || kind.is_file() || kind.is_char_device() || kind.is_block_device()) {
        return (Vec::new(), true);
    }
    if meta.permissions().mode() & 0o004 == 0 {
        return (Vec::new(), false);
    }
    if !meta.is_dir() || depth == 0 {
        return (vec![path.to_path_buf()], true);
    }
    let Ok(children) = std::fs::read_dir(path) else {
        return (Vec::new(), false);
    };
    let (mut parts, mut all) = (Vec::new(), true);
    for child in children.flatten() {
        let (granted, whole) = readable_tree(&child.path(), depth - 1);
        all &= whole;
        parts.extend(granted);
    }
    if all {
        (vec![path.to_path_buf()], true)
    } else {
        (parts, false)
    }
}

/// What network a confined process may reach.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum Network {
    /// None: IPv4 and IPv6 sockets are refused, and no TCP port may be bound or connected.
    #[default]
    None,
    /// Through Ravi's egress proxy only, from a private network namespace: the hosts `allow`
    /// names (patterns as [`egress::host_matches`] reads them), and local addresses only when
    /// `loopback` is set.
    Proxied {
        /// Host patterns.
        allow: Vec<String>,
        /// Whether loopback (and link-local) destinations may be reached.
        loopback: bool,
    },
}

/// A `[sandbox.shell]` or `[sandbox.mcp.NAME]` table of ravi.toml: how one kind of process is
/// confined. Every field is optional; the defaults are the safe ones.
///
/// ```
/// let s: ravi_confine::Settings = toml::from_str(r#"
///     mode = "workspace"
///     read_only = ["/srv/models"]
///     network = ["api.github.com", "*.githubusercontent.com"]
///     processes = 64
/// "#).unwrap();
/// s.check().unwrap();
/// assert_eq!(s.limits(ravi_confine::Limits::default()).processes, 64);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct Settings {
    /// `workspace` (default), `strict` or `off`.
    #[serde(default)]
    pub mode: Mode,
    /// More folders (or files) it may read, besides the system's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub read_only: Vec<PathBuf>,
    /// More folders (or files) it may read and write.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub read_write: Vec<PathBuf>,
    /// Replaces the list of system folders it may read ([`SYSTEM_READ_ONLY`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system: Option<Vec<PathBuf>>,
    /// Hosts it may reach through Ravi's egress proxy (`api.github.com`, `*.example.com`,
    /// `*`). Empty (the default): no network.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub network: Vec<String>,
    /// Whether it may reach loopback (and link-local) addresses through the proxy.
    #[serde(default)]
    pub loopback: bool,
    /// CPU seconds (`0`: no limit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_secs: Option<u64>,
    /// Address space in MiB (`0`: no limit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address_space_mb: Option<u64>,
    /// Open files (`0`: no limit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_files: Option<u64>,
    /// Processes of the tree (`0`: no limit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub processes: Option<u64>,
    /// The largest file it may write, in MiB (`0`: no limit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_size_mb: Option<u64>,
}

impl Settings {
    /// Settings of `mode` with every other field at its default.
    pub fn with_mode(mode: Mode) -> Self {
        Self {
            mode,
            ..Self::default()
        }
    }

    /// Checks the paths (absolute, or `~/…`) and host patterns; the error names the field
    /// and the value.
    pub fn check(&self) -> Result<(), ConfineError> {
        let fields = [
            ("read_only", &self.read_only),
            ("read_write", &self.read_write),
        ];
        let system = self.system.iter().map(|s| ("system", s));
        for (field, paths) in fields.into_iter().chain(system) {
            for path in paths {
                if !path.is_absolute() && !path.starts_with("~") {
                    return Err(ConfineError::BadSetting {
                        field,
                        reason: format!(
                            "`{}` is not an absolute path (or one starting with ~/)",
                            path.display()
                        ),
                    });
                }
            }
        }
        for pattern in &self.network {
            egress::check_pattern(pattern).map_err(|reason| ConfineError::BadSetting {
                field: "network",
                reason,
            })?;
        }
        Ok(())
    }

    /// `base` with the limits these settings set.
    pub fn limits(&self, base: Limits) -> Limits {
        let mib = |v: u64| v.saturating_mul(1 << 20);
        Limits {
            cpu_secs: self.cpu_secs.unwrap_or(base.cpu_secs),
            address_space_bytes: self.address_space_mb.map_or(base.address_space_bytes, mib),
            open_files: self.open_files.unwrap_or(base.open_files),
            processes: self.processes.unwrap_or(base.processes),
            file_size_bytes: self.file_size_mb.map_or(base.file_size_bytes, mib),
        }
    }

    fn network(&self) -> Network {
        if self.network.is_empty() && !self.loopback {
            Network::None
        } else {
            Network::Proxied {
                allow: self.network.clone(),
                loopback: self.loopback,
            }
        }
    }

    fn system(&self) -> Vec<PathBuf> {
        match &self.system {
            Some(list) => list.iter().map(|p| expand_home(p)).collect(),
            None => SYSTEM_READ_ONLY.iter().map(PathBuf::from).collect(),
        }
    }
}

/// `~/x` → `$HOME/x`.
fn expand_home(path: &Path) -> PathBuf {
    match path.strip_prefix("~") {
        Ok(rest) => std::env::var_os("HOME")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("/nonexistent-home"))
            .join(rest),
        Err(_) => path.to_path_buf(),
    }
}

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
    /// What network it may reach.
    pub network: Network,
    /// Its resource limits.
    pub limits: Limits,
    /// The settings table that made it (`[sandbox.shell]`, `[sandbox.mcp.fs]`), named in
    /// refusals.
    pub table: String,
}

impl Policy {
    /// The policy of a `shell` command under `mode`: the workspace (read-write, or read-only
    /// when strict), a private temporary folder `tmp`, the system folders read-only, no
    /// network, the default limits.
    pub fn for_shell(mode: Mode, workspace: &Path, tmp: &Path) -> Self {
        Self::shell(&Settings::with_mode(mode), workspace, tmp)
    }

    /// The policy of a `shell` command under `settings` (`[sandbox.shell]`).
    pub fn shell(settings: &Settings, workspace: &Path, tmp: &Path) -> Self {
        let mut policy = Self::base(settings, tmp, "[sandbox.shell]".into(), Limits::default());
        if settings.mode == Mode::Strict {
            policy.read_only.push(workspace.to_path_buf());
        } else {
            policy.read_write.push(workspace.to_path_buf());
        }
        policy
    }

    /// The policy of the stdio MCP server `name`, started as `command args…`, under
    /// `settings` (`[sandbox.mcp.NAME]`):
    /// - read-only: the system folders, the program's own installation (the folder above
    ///   its `bin/`, for the path given and the one its symlinks lead to), and for each
    ///   argument naming an existing file, the package it belongs to (the folder holding its
    ///   outermost `node_modules`, else its own folder, unless that is `/` or the home folder:
    ///   then the file alone);
    /// - read-write: the folders named in its arguments (its roots; read-only when strict)
    ///   and the private temporary folder `tmp`;
    /// - plus what `settings` adds; no network unless `settings` grants it; the server
    ///   limits ([`Limits::server`]) unless `settings` sets others.
    pub fn mcp_server(
        settings: &Settings,
        name: &str,
        command: &str,
        args: &[String],
        tmp: &Path,
    ) -> Self {
        let mut policy = Self::base(
            settings,
            tmp,
            format!("[sandbox.mcp.{name}]"),
            Limits::server(),
        );
        let home = std::env::var_os("HOME").map(PathBuf::from);
        let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
        let bare = |p: &Path| p == Path::new("/") || Some(p) == home.as_deref();
        if let Some(program) = find_program(command, &cwd) {
            let real = std::fs::canonicalize(&program).ok();
            for path in std::iter::once(program).chain(real) {
                let Some(dir) = path.parent() else { continue };
                let prefix = match (dir.file_name(), dir.parent()) {
                    (Some(n), Some(up)) if n == "bin" => up,
                    _ => dir,
                };
                let grant = if bare(prefix) {
                    path.clone()
                } else {
                    prefix.to_path_buf()
                };
                push_new(&mut policy.read_only, grant);
            }
        }
        for arg in args {
            let value = match arg.split_once('=') {
                Some((flag, value)) if flag.starts_with('-') => value,
                _ => arg.as_str(),
            };
            if value.is_empty() || value.starts_with('-') {
                continue;
            }
            let path = cwd.join(value);
            if path.is_dir() {
                if settings.mode == Mode::Strict {
                    push_new(&mut policy.read_only, path);
                } else {
                    push_new(&mut policy.read_write, path);
                }
            } else if path.is_file() {
                let package = path
                    .ancestors()
                    .filter(|a| a.file_name().is_some_and(|n| n == "node_modules"))
                    .last()
                    .and_then(Path::parent)
                    .or_else(|| path.parent())
                    .filter(|p| !bare(p))
                    .map_or_else(|| path.clone(), Path::to_path_buf);
                push_new(&mut policy.read_only, package);
            }
        }
        policy
    }

    fn base(settings: &Settings, tmp: &Path, table: String, limits: Limits) -> Self {
        let mut read_write = vec![tmp.to_path_buf(), PathBuf::from("/dev/null")];
        read_write.extend(settings.read_write.iter().map(|p| expand_home(p)));
        let mut read_only = settings.system();
        read_only.extend(settings.read_only.iter().map(|p| expand_home(p)));
        Self {
            mode: settings.mode,
            read_write,
            read_only,
            network: settings.network(),
            limits: settings.limits(limits),
            table,
        }
    }

    /// Builds the kernel objects in the parent. Fails, naming the missing kernel feature,
    /// when this kernel (or this process) cannot enforce the policy; a policy of
    /// [`Mode::Off`] prepares nothing.
    pub fn prepare(&self) -> Result<Prepared, ConfineError> {
        if self.mode == Mode::Off {
            return Ok(Prepared::default());
        }
        let ruleset = self.ruleset()?;
        let proxied = matches!(self.network, Network::Proxied { .. });
        let filter = seccomp::filter(proxied)?;
        // SAFETY: geteuid only returns a number.
        #[expect(unsafe_code, reason = "geteuid has no safe wrapper in libc")]
        let root = unsafe { libc::geteuid() } == 0;
        let cgroup = match self.limits.processes {
            0 => None,
            max => match cgroup::Group::create(max) {
                Ok(group) => Some(group),
                // Not root: RLIMIT_NPROC bounds the tree instead.
                Err(_) if !root => None,
                Err(detail) => {
                    return Err(ConfineError::NoProcessBound {
                        table: self.table.clone(),
                        detail,
                    });
                }
            },
        };
        let net = match &self.network {
            Network::None => None,
            Network::Proxied { allow, loopback } => {
                if !root
                    && let Some(detail) = userns_blocker(|path| std::fs::read_to_string(path).ok())
                {
                    return Err(ConfineError::Unsupported {
                        feature: "unprivileged user namespaces (a process granted network runs \
                                  in a network namespace of its own)",
                        detail,
                    });
                }
                let (enter, parent) = netns::prepare().map_err(|e| ConfineError::Unsupported {
                    feature: "a socket pair for the network namespace",
                    detail: e.to_string(),
                })?;
                let rules = egress::Rules {
                    allow: allow.clone(),
                    loopback: *loopback,
                    table: self.table.clone(),
                };
                Some((enter, parent, rules))
            }
        };
        Ok(Prepared {
            ruleset: Some(ruleset),
            filter: Some(filter),
            limits: Some(self.limits),
            cgroup,
            net,
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
        if self.network == Network::None {
            ruleset = ruleset
                .handle_access(AccessNet::from_all(ABI::V4))
                .map_err(missing("Landlock network rules (ABI 4, Linux 6.7)"))?;
        }
        let mut created = ruleset.create().map_err(missing(
            "Landlock (Linux 5.13 with `landlock` in the LSM list)",
        ))?;
        let read = AccessFs::from_read(ABI::V3);
        let file_rights = AccessFs::from_file(ABI::V3);
        for (paths, access) in [(&self.read_only, read), (&self.read_write, fs)] {
            for path in paths {
                if access == read
                    && let Some(grants) = system_grants(path)
                {
                    for g in grants {
                        let access = if g.dir { access } else { access & file_rights };
                        created =
                            created
                                .add_rule(PathBeneath::new(&g.fd, access))
                                .map_err(|e| ConfineError::Rule {
                                    path: g.path.clone(),
                                    detail: e.to_string(),
                                })?;
                    }
                    continue;
                }
                let Ok(fd) = PathFd::new(path) else {
                    // A folder this system does not have grants nothing.
                    continue;
                };
                // A file takes only the rights that apply to files.
                let access = if path.is_dir() {
                    access
                } else {
                    access & file_rights
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

    /// One line for logs and traces: the mode, the writable folders, the network.
    pub fn summary(&self) -> String {
        if self.mode == Mode::Off {
            return "off (unconfined)".into();
        }
        let rw: Vec<String> = self
            .read_write
            .iter()
            .filter(|p| *p != Path::new("/dev/null"))
            .map(|p| p.display().to_string())
            .collect();
        let net = match &self.network {
            Network::None => "no network".to_owned(),
            Network::Proxied { allow, loopback } => format!(
                "network via proxy to [{}]{}",
                allow.join(", "),
                if *loopback { " and loopback" } else { "" }
            ),
        };
        format!("{}: writes in [{}], {net}", self.mode, rw.join(", "))
    }
}

/// What keeps this (non-root) user from making a user namespace, when a kernel setting
/// does: `read` gives a `/proc/sys` file's text.
fn userns_blocker(read: impl Fn(&str) -> Option<String>) -> Option<String> {
    let setting = |path: &str, blocks: &str| {
        read(path)
            .filter(|v| v.trim() == blocks)
            .map(|v| format!("{path} is {}", v.trim()))
    };
    setting("/proc/sys/user/max_user_namespaces", "0")
        .or_else(|| setting("/proc/sys/kernel/unprivileged_userns_clone", "0"))
        .or_else(|| {
            setting(
                "/proc/sys/kernel/apparmor_restrict_unprivileged_userns",
                "1",
            )
        })
}

fn push_new(list: &mut Vec<PathBuf>, path: PathBuf) {
    if !list.contains(&path) {
        list.push(path);
    }
}

/// `command` as `exec` would find it: a path (relative to `cwd`), or the first executable of
/// that name on `PATH`.
fn find_program(command: &str, cwd: &Path) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt as _;
    if command.contains('/') {
        return Some(cwd.join(command));
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(command))
        .find(|p| {
            std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

/// A policy's kernel objects, built before `fork`; [`confine_command`] has the child enforce
/// them.
#[derive(Default)]
pub struct Prepared {
    ruleset: Option<RulesetCreated>,
    filter: Option<seccompiler::BpfProgram>,
    limits: Option<Limits>,
    cgroup: Option<cgroup::Group>,
    net: Option<(netns::NetEnter, netns::NetParent, egress::Rules)>,
}

impl std::fmt::Debug for Prepared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Prepared")
            .field("landlock", &self.ruleset.is_some())
            .field("seccomp", &self.filter.is_some())
            .field("limits", &self.limits)
            .field("cgroup", &self.cgroup.is_some())
            .field("network_namespace", &self.net.is_some())
            .finish()
    }
}

/// What the child runs between `fork` and `exec`.
struct ChildSteps {
    ruleset: Option<RulesetCreated>,
    filter: Option<seccompiler::BpfProgram>,
    limits: Option<Limits>,
    cgroup_procs: Option<std::os::fd::RawFd>,
    net: Option<netns::NetEnter>,
}

impl ChildSteps {
    /// Limits, the process group's cgroup, the network namespace, `no_new_privs` and the
    /// Landlock ruleset, then the system-call filter. Once applied, the process and its
    /// children cannot undo them.
    fn apply(&mut self) -> std::io::Result<()> {
        if let Some(limits) = self.limits {
            for (resource, value) in [
                (libc::RLIMIT_CPU, limits.cpu_secs),
                (libc::RLIMIT_AS, limits.address_space_bytes),
                (libc::RLIMIT_NOFILE, limits.open_files),
                (libc::RLIMIT_NPROC, limits.processes),
                (libc::RLIMIT_FSIZE, limits.file_size_bytes),
            ] {
                if value == 0 {
                    continue;
                }
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
        if let Some(fd) = self.cgroup_procs {
            cgroup::join(fd)?;
        }
        if let Some(net) = &self.net {
            net.enter()?;
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

/// The parent's side of a confined process: keep it as long as the process runs. Call
/// [`started`](Self::started) right after a successful spawn; dropping it kills every process
/// left in the tree (through its cgroup, where there is one) and stops its proxy.
#[derive(Debug, Default)]
#[must_use = "dropping the guard kills the confined process tree"]
pub struct Confined {
    cgroup: Option<Arc<cgroup::Group>>,
    net: Option<(netns::NetParent, egress::Rules)>,
    proxy: Option<tokio::task::AbortHandle>,
}

impl Confined {
    /// After a successful spawn: starts the egress proxy of a process granted network (inside
    /// a tokio runtime). Without a network grant, does nothing.
    pub fn started(&mut self) -> Result<(), ConfineError> {
        let Some((parent, rules)) = self.net.take() else {
            return Ok(());
        };
        let proxy_err = |detail: String| ConfineError::Unsupported {
            feature: "the egress proxy of a private network namespace",
            detail,
        };
        let listener = parent.receive().map_err(|e| proxy_err(e.to_string()))?;
        listener
            .set_nonblocking(true)
            .map_err(|e| proxy_err(e.to_string()))?;
        let runtime = tokio::runtime::Handle::try_current()
            .map_err(|_| proxy_err("the proxy runs on a tokio runtime; none is running".into()))?;
        let _guard = runtime.enter();
        let listener =
            tokio::net::TcpListener::from_std(listener).map_err(|e| proxy_err(e.to_string()))?;
        let task = runtime.spawn(egress::serve(listener, Arc::new(rules)));
        self.proxy = Some(task.abort_handle());
        Ok(())
    }

    /// Kills every process of the tree now (those that left its process group included,
    /// where a cgroup holds the tree).
    pub fn kill_all(&self) {
        if let Some(group) = &self.cgroup {
            group.kill_all();
        }
    }

    /// Whether a pids cgroup holds the tree (bounding its processes, even for root).
    pub fn has_cgroup(&self) -> bool {
        self.cgroup.is_some()
    }
}

impl Drop for Confined {
    fn drop(&mut self) {
        if let Some(proxy) = self.proxy.take() {
            proxy.abort();
        }
    }
}

/// The environment a proxied process gets: every usual proxy variable pointing at the
/// namespace's proxy, and Node told to honour them.
pub const PROXY_ENV: &[(&str, &str)] = &[
    ("HTTP_PROXY", "http://127.0.0.1:3128"),
    ("HTTPS_PROXY", "http://127.0.0.1:3128"),
    ("ALL_PROXY", "http://127.0.0.1:3128"),
    ("http_proxy", "http://127.0.0.1:3128"),
    ("https_proxy", "http://127.0.0.1:3128"),
    ("all_proxy", "http://127.0.0.1:3128"),
    ("NO_PROXY", ""),
    ("no_proxy", ""),
    ("NODE_USE_ENV_PROXY", "1"),
];

fn split(prepared: Prepared) -> (ChildSteps, Confined, bool) {
    let Prepared {
        ruleset,
        filter,
        limits,
        cgroup,
        net,
    } = prepared;
    let cgroup = cgroup.map(Arc::new);
    let (enter, parent) = match net {
        Some((enter, parent, rules)) => (Some(enter), Some((parent, rules))),
        None => (None, None),
    };
    let proxied = parent.is_some();
    let steps = ChildSteps {
        ruleset,
        filter,
        limits,
        cgroup_procs: cgroup.as_deref().map(cgroup::Group::procs_fd),
        net: enter,
    };
    let confined = Confined {
        cgroup,
        net: parent,
        proxy: None,
    };
    (steps, confined, proxied)
}

/// Makes `cmd` enforce `prepared` in its child before `exec`; keep the returned guard while
/// the process runs.
pub fn confine_command(cmd: &mut std::process::Command, prepared: Prepared) -> Confined {
    use std::os::unix::process::CommandExt as _;
    let (mut steps, confined, proxied) = split(prepared);
    if proxied {
        cmd.envs(PROXY_ENV.iter().copied());
    }
    // SAFETY: the closure runs in the child after fork; it only makes system calls (setrlimit,
    // write, unshare, ioctl, socket, sendmsg, prctl, landlock_restrict_self, seccomp) on
    // objects and buffers built before the fork.
    #[expect(
        unsafe_code,
        reason = "pre_exec is how a child is confined before exec"
    )]
    unsafe {
        cmd.pre_exec(move || steps.apply());
    }
    confined
}

/// Makes the tokio `cmd` enforce `prepared` in its child before `exec`; keep the returned
/// guard while the process runs.
pub fn confine_tokio_command(cmd: &mut tokio::process::Command, prepared: Prepared) -> Confined {
    let (mut steps, confined, proxied) = split(prepared);
    if proxied {
        cmd.envs(PROXY_ENV.iter().copied());
    }
    // SAFETY: as in `confine_command`: system calls only, on objects built before the fork.
    #[expect(
        unsafe_code,
        reason = "pre_exec is how a child is confined before exec"
    )]
    unsafe {
        cmd.pre_exec(move || steps.apply());
    }
    confined
}

/// A confined process's own temporary folder (its `TMPDIR`), removed with everything in it
/// when dropped.
#[derive(Debug)]
pub struct PrivateTmp(PathBuf);

impl PrivateTmp {
    /// A new folder `ravi-{kind}-{random}` in the system's temporary folder.
    pub fn new(kind: &str) -> std::io::Result<Self> {
        let mut bytes = [0u8; 8];
        // SAFETY: getrandom writes at most `len` bytes into the buffer it is given.
        #[expect(unsafe_code, reason = "getrandom has no safe wrapper in libc")]
        let n = unsafe { libc::getrandom(bytes.as_mut_ptr().cast(), bytes.len(), 0) };
        if usize::try_from(n).ok() != Some(bytes.len()) {
            return Err(std::io::Error::last_os_error());
        }
        let dir =
            std::env::temp_dir().join(format!("ravi-{kind}-{:016x}", u64::from_le_bytes(bytes)));
        std::fs::create_dir(&dir)?;
        Ok(Self(dir))
    }

    /// The folder.
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for PrivateTmp {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Whether this process can bound a confined tree's processes with a pids cgroup.
pub fn cgroup_available() -> bool {
    cgroup::available()
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
    /// Running as root without a pids cgroup: nothing would bound the process count.
    #[error(
        "the process limit cannot be enforced: Ravi runs as root, which RLIMIT_NPROC does not \
         bind, and it cannot make a pids cgroup ({detail}); mount a pids controller \
         writable, run Ravi as another user, or set `processes = 0` in {table} to run without \
         a process limit (--sandbox off runs unconfined)"
    )]
    NoProcessBound {
        /// The settings table (`[sandbox.shell]`).
        table: String,
        /// Why no pids cgroup could be made.
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
    /// A settings field with a value it cannot take.
    #[error("`{field}`: {reason}")]
    BadSetting {
        /// The field (`network`, `read_only`, …).
        field: &'static str,
        /// What was wrong and what is expected.
        reason: String,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kernel_settings_that_forbid_user_namespaces_are_named() {
        let machine = |files: &'static [(&'static str, &'static str)]| {
            move |path: &str| {
                files
                    .iter()
                    .find(|(p, _)| *p == path)
                    .map(|(_, v)| (*v).to_owned())
            }
        };
        assert_eq!(userns_blocker(machine(&[])), None);
        assert_eq!(
            userns_blocker(machine(&[(
                "/proc/sys/user/max_user_namespaces",
                "63204\n"
            )])),
            None
        );
        assert_eq!(
            userns_blocker(machine(&[("/proc/sys/user/max_user_namespaces", "0\n")])).as_deref(),
            Some("/proc/sys/user/max_user_namespaces is 0")
        );
        assert_eq!(
            userns_blocker(machine(&[(
                "/proc/sys/kernel/unprivileged_userns_clone",
                "0"
            )]))
            .as_deref(),
            Some("/proc/sys/kernel/unprivileged_userns_clone is 0")
        );
        assert_eq!(
            userns_blocker(machine(&[(
                "/proc/sys/kernel/apparmor_restrict_unprivileged_userns",
                "1"
            )]))
            .as_deref(),
            Some("/proc/sys/kernel/apparmor_restrict_unprivileged_userns is 1")
        );
    }
}
