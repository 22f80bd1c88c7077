//! Who runs a run: the [`RunOwner`] a process records when it takes a run (`ravi run`,
//! `ravi agent`), and how a reader tells whether that process is still alive.
//!
//! A gateway replica renews a lease instead (its run's `updated_ms`), because replicas on
//! several machines must notice each other's death. A script's or an agent's process is
//! checked where it ran: on Linux its process id, qualified by the machine's boot id, its PID
//! namespace and its start time, names exactly one process, which is either still there or
//! gone. Another boot of the same machine (the same `/etc/machine-id`) has ended every process
//! of the boot before. Elsewhere (another machine, another namespace, no `/proc`, a process
//! table this process may not read) nothing can be told, and the run is taken to be running.

use ravi_kernel::{RunKind, RunOwner, RunRecord, RunStatus};

/// Whether a run's owner is alive, as far as this process can tell.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Liveness {
    /// The process is running.
    Alive,
    /// The process is gone; the text says how that is known.
    Gone(String),
    /// It cannot be checked from here (another machine or PID namespace, no `/proc`).
    Unknown,
}

/// This process, as a run's owner.
pub fn this_process() -> RunOwner {
    let mut owner = RunOwner::new(std::process::id());
    owner.boot_id = read_trimmed("/proc/sys/kernel/random/boot_id");
    owner.machine_id = read_trimmed("/etc/machine-id");
    owner.pid_ns = std::fs::read_link("/proc/self/ns/pid")
        .ok()
        .map(|p| p.to_string_lossy().into_owned());
    owner.start_ticks = std::fs::read_to_string("/proc/self/stat")
        .ok()
        .and_then(|s| parse_stat(&s))
        .map(|(_, start)| start);
    owner.host = read_trimmed("/proc/sys/kernel/hostname");
    owner
}

/// Whether `owner` is still alive, checked from this process.
pub fn liveness(owner: &RunOwner) -> Liveness {
    liveness_from(owner, &this_process(), |pid| {
        match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            Ok(line) => Stat::Line(line),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Stat::Missing,
            // Permission (a `hidepid` mount) or anything else: not a sign of death.
            Err(_) => Stat::Unreadable,
        }
    })
}

/// Why `run` was interrupted: a script or agent run recorded as running whose owner is gone.
/// `None` for any other run (finished, paused, still running, or one that cannot be checked
/// from here).
pub fn interrupted(run: &RunRecord) -> Option<String> {
    if run.status != RunStatus::Running || !matches!(run.kind, RunKind::Script | RunKind::Agent) {
        return None;
    }
    match liveness(run.owner.as_ref()?) {
        Liveness::Gone(why) => Some(why),
        _ => None,
    }
}

/// What reading a process's `/proc/PID/stat` gave.
enum Stat {
    /// Its line.
    Line(String),
    /// No such process.
    Missing,
    /// It could not be read (permissions): nothing can be told.
    Unreadable,
}

/// [`liveness`] of `owner` as seen by `me`, reading a process's `/proc/PID/stat` with `stat`.
fn liveness_from(owner: &RunOwner, me: &RunOwner, stat: impl Fn(u32) -> Stat) -> Liveness {
    let (Some(theirs), Some(mine)) = (&owner.boot_id, &me.boot_id) else {
        return Liveness::Unknown;
    };
    if theirs != mine {
        // Another boot of this machine has ended everything that ran before it; another
        // machine (whatever its host name) says nothing about it.
        return match (&owner.machine_id, &me.machine_id) {
            (Some(a), Some(b)) if a == b => {
                let on = owner
                    .host
                    .as_deref()
                    .map(|h| format!(" ({h})"))
                    .unwrap_or_default();
                Liveness::Gone(format!(
                    "its machine{on} restarted since pid {} ran it",
                    owner.pid
                ))
            }
            _ => Liveness::Unknown,
        };
    }
    match (&owner.pid_ns, &me.pid_ns) {
        (Some(a), Some(b)) if a == b => {}
        _ => return Liveness::Unknown,
    }
    let host = owner
        .host
        .as_deref()
        .map(|h| format!(" on {h}"))
        .unwrap_or_default();
    let gone = |how: &str| {
        Liveness::Gone(format!(
            "the process running it (pid {}{host}) is gone{how}",
            owner.pid
        ))
    };
    let line = match stat(owner.pid) {
        Stat::Line(line) => line,
        Stat::Missing => return gone(""),
        Stat::Unreadable => return Liveness::Unknown,
    };
    match parse_stat(&line) {
        None => Liveness::Unknown,
        // Dead and not yet reaped by its parent.
        Some(('Z' | 'X' | 'x', _)) => gone(""),
        Some((_, start)) if owner.start_ticks.is_some_and(|t| t != start) => {
            gone(": its process id now names another process")
        }
        Some(_) => Liveness::Alive,
    }
}

/// The state and start time (clock ticks since boot) in a `/proc/PID/stat` line. The command
/// name (field 2) is in parentheses and may hold spaces and parentheses itself: the fields
/// after it follow the last `)`.
fn parse_stat(line: &str) -> Option<(char, u64)> {
    let rest = line.get(line.rfind(')')? + 1..)?;
    let mut fields = rest.split_whitespace();
    // Field 3 is the state; field 22 the start time: 19 fields further.
    let state = fields.next()?.chars().next()?;
    let start = fields.nth(18)?.parse().ok()?;
    Some((state, start))
}

fn read_trimmed(path: &str) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owner(pid: u32, boot: &str, ns: &str, start: u64, host: &str) -> RunOwner {
        let mut o = RunOwner::new(pid);
        o.boot_id = Some(boot.into());
        o.machine_id = Some(format!("machine-of-{host}"));
        o.pid_ns = Some(ns.into());
        o.start_ticks = Some(start);
        o.host = Some(host.into());
        o
    }

    fn stat_line(pid: u32, state: char, start: u64) -> String {
        // pid (comm) state, then fields 4..=21, then the start time (22) and more.
        let middle = vec!["0"; 18].join(" ");
        format!("{pid} (a (b) c) {state} {middle} {start} 0 0")
    }

    #[test]
    fn stat_lines_give_state_and_start_time_whatever_the_command_name() {
        assert_eq!(parse_stat(&stat_line(7, 'S', 4242)), Some(('S', 4242)));
        assert_eq!(parse_stat("7 (x) R 1 2"), None);
        assert_eq!(parse_stat("garbage"), None);
    }

    #[test]
    fn this_process_is_alive_and_described_on_linux() {
        let me = this_process();
        assert_eq!(me.pid, std::process::id());
        if cfg!(target_os = "linux") {
            assert!(me.boot_id.is_some() && me.pid_ns.is_some() && me.start_ticks.is_some());
            assert_eq!(liveness(&me), Liveness::Alive);
        }
    }

    #[test]
    fn an_owner_is_judged_only_where_it_can_be() {
        let me = owner(1, "boot-a", "pid:[1]", 100, "box");
        let running = |pid| Stat::Line(stat_line(pid, 'S', 500));
        let none = |_| Stat::Missing;
        // Same boot and namespace: the process table decides.
        let o = owner(42, "boot-a", "pid:[1]", 500, "box");
        assert_eq!(liveness_from(&o, &me, running), Liveness::Alive);
        assert!(
            matches!(liveness_from(&o, &me, none), Liveness::Gone(w) if w.contains("pid 42 on box"))
        );
        assert!(matches!(
            liveness_from(&o, &me, |pid| Stat::Line(stat_line(pid, 'Z', 500))),
            Liveness::Gone(_)
        ));
        // Its id reused by a later process.
        let reused = |pid| Stat::Line(stat_line(pid, 'S', 900));
        assert!(
            matches!(liveness_from(&o, &me, reused), Liveness::Gone(w) if w.contains("another process"))
        );
        // Another namespace (a container), another machine: unknown, whatever the table says.
        let other_ns = owner(42, "boot-a", "pid:[2]", 500, "box");
        assert_eq!(liveness_from(&other_ns, &me, none), Liveness::Unknown);
        let other_host = owner(42, "boot-b", "pid:[1]", 500, "elsewhere");
        assert_eq!(liveness_from(&other_host, &me, none), Liveness::Unknown);
        // This machine, an earlier boot: gone.
        let rebooted = owner(42, "boot-b", "pid:[1]", 500, "box");
        assert!(
            matches!(liveness_from(&rebooted, &me, running), Liveness::Gone(w) if w.contains("restarted"))
        );
        // A process table it may not read, or a line it cannot parse: not a death.
        assert_eq!(
            liveness_from(&o, &me, |_| Stat::Unreadable),
            Liveness::Unknown
        );
        assert_eq!(
            liveness_from(&o, &me, |_| Stat::Line("garbage".into())),
            Liveness::Unknown
        );
        // Another machine with the same host name (a container's fixed `hostname:`): unknown.
        let mut twin = owner(42, "boot-b", "pid:[1]", 500, "box");
        twin.machine_id = Some("another-machine".into());
        assert_eq!(liveness_from(&twin, &me, running), Liveness::Unknown);
        // No machine id to compare: unknown too.
        twin.machine_id = None;
        assert_eq!(liveness_from(&twin, &me, running), Liveness::Unknown);
        // Nothing to go on.
        assert_eq!(
            liveness_from(&RunOwner::new(42), &me, none),
            Liveness::Unknown
        );
    }

    #[test]
    fn only_running_scripts_and_agents_are_interrupted() {
        let mut gone = this_process();
        // A start time this process never had: its id names another process now.
        gone.start_ticks = gone.start_ticks.map(|t| t + 1);
        let run = |kind, status| {
            let mut r = RunRecord::new("run_1", kind, "ses_1", serde_json::json!({}))
                .with_owner(gone.clone());
            r.status = status;
            r
        };
        if cfg!(target_os = "linux") {
            assert!(interrupted(&run(RunKind::Script, RunStatus::Running)).is_some());
            assert!(interrupted(&run(RunKind::Agent, RunStatus::Running)).is_some());
        }
        assert_eq!(interrupted(&run(RunKind::Serve, RunStatus::Running)), None);
        assert_eq!(interrupted(&run(RunKind::Script, RunStatus::Paused)), None);
        assert_eq!(interrupted(&run(RunKind::Script, RunStatus::Failed)), None);
        let alive = RunRecord::new("run_2", RunKind::Script, "ses_2", serde_json::json!({}))
            .with_owner(this_process());
        assert_eq!(interrupted(&alive), None);
    }
}
