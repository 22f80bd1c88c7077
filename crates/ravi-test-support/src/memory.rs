//! Resident memory as Linux reports it in `/proc/PID/status`, for the tests and benchmarks
//! that bound a process's peak memory.

/// A `/proc/PID/status` field (`"VmRSS:"`, `"VmHWM:"` …) in KiB, of process `pid` or, with
/// `None`, of this process; 0 when it cannot be read (a process that has exited, not Linux).
pub fn status_kib(pid: Option<u32>, field: &str) -> u64 {
    let path = match pid {
        Some(pid) => format!("/proc/{pid}/status"),
        None => "/proc/self/status".to_owned(),
    };
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// Resets this process's peak resident memory (`clear_refs` 5, so `VmHWM:` starts again from
/// now) and returns the current resident memory in KiB.
pub fn reset_peak_kib() -> u64 {
    // Not every kernel lets a process reset its counter; the peak then only grows, which
    // overstates what follows and never hides it.
    let _ = std::fs::write("/proc/self/clear_refs", "5");
    status_kib(None, "VmRSS:")
}
