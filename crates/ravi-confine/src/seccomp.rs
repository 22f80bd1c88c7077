//! The system-call filter of a confined process (`seccompiler`, the Firecracker project's
//! compiler): the dangerous families answer `EPERM`, and without network IPv4/IPv6 sockets
//! too.

use crate::ConfineError;

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

pub(crate) fn filter(inet: bool) -> Result<seccompiler::BpfProgram, ConfineError> {
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
    if !inet {
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
