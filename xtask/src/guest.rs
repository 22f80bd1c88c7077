//! `cargo xtask guest [--check]`: the committed code-mode guest.
//!
//! The host's builds take the guest's wasm module from `crates/ravi-sandbox-guest/prebuilt/`
//! when its key file names the current sources (see `crates/ravi-sandbox-artifact/build.rs`).
//! This task builds the module from source (the build script with `RAVI_GUEST_FROM_SOURCE=1`,
//! in a target directory of its own so the workspace's build is not invalidated, and in the
//! usual sandbox directory so the nested guest build is shared) and copies it and its key there; with
//! `--check` it copies nothing and fails unless the committed module was built from the
//! current sources and has the fresh build's shape.
//!
//! RustPython's build is not bit-for-bit reproducible: its macros emit some names in hash
//! order and the frozen standard library's bytecode orders sets by hash, so two builds of the
//! same sources differ in the order of constant data (and, through the data's addresses, in a
//! few bytes of code). The check therefore compares what a build fixes: the key, every section
//! but code and data byte for byte (types, imports, the function list, table, memory, globals,
//! exports, element segments), the number of function bodies and data segments, and the code
//! and data sections' sizes to within [`SIZE_SLACK`].

use std::path::Path;

use anyhow::{Context as _, bail};

use crate::util;

/// How far the code and data sections' sizes of two builds of the same sources may differ, as
/// a fraction of their size (observed: one byte of code in 15 MB, no byte of data).
const SIZE_SLACK: f64 = 1e-4;

/// Runs the task.
pub fn run(rest: &[String]) -> anyhow::Result<()> {
    let check = match rest {
        [] => false,
        [flag] if flag == "--check" => true,
        _ => bail!("usage: cargo xtask guest [--check]"),
    };
    let root = util::workspace_root()?;
    if !check {
        // A refreshed guest is a linted one: the default test run checks only that the
        // committed module was built from the current sources.
        clippy()?;
    }
    let (target, sandbox) = crate::sandbox_dirs(&root);
    let outer = target.join("guest-from-source");
    util::run_env(
        "cargo",
        &["build", "--release", "-p", "ravi-sandbox-artifact"],
        &[
            ("RAVI_GUEST_FROM_SOURCE", "1"),
            ("CARGO_TARGET_DIR", &outer.to_string_lossy()),
            ("RAVI_SANDBOX_DIR", &sandbox.to_string_lossy()),
        ],
    )?;
    let built = sandbox.join("guest/wasm32-wasip1/release/ravi_sandbox_guest.wasm");
    let committed = root.join("crates/ravi-sandbox-guest/prebuilt/ravi_sandbox_guest.wasm");
    if check {
        let (built_key, committed_key) = (key(&built)?, key(&committed)?);
        if built_key != committed_key {
            bail!(
                "the committed guest ({}) was built from other sources (key {committed_key}) \
                 than the current ones (key {built_key}): run `cargo xtask guest` and commit \
                 crates/ravi-sandbox-guest/prebuilt/",
                committed.display()
            );
        }
        let (fresh, old) = (read(&built)?, read(&committed)?);
        same_shape(&fresh, &old).with_context(|| {
            format!(
                "the committed guest ({}) does not have the shape of the module its sources \
                 build ({}): run `cargo xtask guest` and commit \
                 crates/ravi-sandbox-guest/prebuilt/",
                committed.display(),
                built.display()
            )
        })?;
        println!(
            "guest: the committed wasm ({} bytes, key {committed_key}) matches a build of its \
             sources ({} bytes)",
            old.len(),
            fresh.len()
        );
    } else {
        if let Some(dir) = committed.parent() {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        }
        for (from, to) in [
            (built.clone(), committed.clone()),
            (
                built.with_extension("wasm.key"),
                committed.with_extension("wasm.key"),
            ),
        ] {
            std::fs::copy(&from, &to)
                .with_context(|| format!("copying {} to {}", from.display(), to.display()))?;
        }
        println!(
            "guest: {} refreshed (key {}); commit crates/ravi-sandbox-guest/prebuilt/",
            committed.display(),
            key(&committed)?
        );
    }
    Ok(())
}

/// clippy `-D warnings` on the guest workspace, as `ravi-sandbox-artifact/build.rs` builds it
/// (wasm target, `--ignore-rust-version`, the committed lock) and in the same target directory,
/// so its dependencies are not checked from scratch elsewhere. Its sources change only with a
/// rebuilt guest, so `cargo xtask guest` runs it before refreshing the committed module and
/// `cargo xtask test --full` runs it; the default test run relies on the committed key.
pub fn clippy() -> anyhow::Result<()> {
    let root = util::workspace_root()?;
    let (_, sandbox_dir) = crate::sandbox_dirs(&root);
    let manifest = root.join("crates/ravi-sandbox-guest/Cargo.toml");
    let guest_dir = sandbox_dir.join("guest").to_string_lossy().into_owned();
    util::run_env(
        "cargo",
        &[
            "clippy",
            "--manifest-path",
            &manifest.to_string_lossy(),
            "--release",
            "--locked",
            "--ignore-rust-version",
            "--target",
            "wasm32-wasip1",
            "-p",
            "ravi-sandbox-guest",
            "--",
            "-D",
            "warnings",
        ],
        &[("CARGO_TARGET_DIR", guest_dir.as_str())],
    )
}

fn read(path: &Path) -> anyhow::Result<Vec<u8>> {
    std::fs::read(path).with_context(|| format!("reading {}", path.display()))
}

/// The `key` line of the key file beside `wasm`.
fn key(wasm: &Path) -> anyhow::Result<String> {
    let file = wasm.with_extension("wasm.key");
    let text =
        std::fs::read_to_string(&file).with_context(|| format!("reading {}", file.display()))?;
    text.lines()
        .find_map(|l| l.strip_prefix("key "))
        .map(|k| k.trim().to_owned())
        .with_context(|| format!("{} has no `key` line", file.display()))
}

/// One section of a wasm module: its id and contents.
type Section<'a> = (u8, &'a [u8]);

/// An unsigned LEB128 number at `*at`, moving `*at` past it.
fn leb(bytes: &[u8], at: &mut usize) -> anyhow::Result<u64> {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let Some(&b) = bytes.get(*at) else {
            bail!("a number runs past the end of the module at byte {at}");
        };
        *at += 1;
        value |= u64::from(b & 0x7f) << shift;
        if b < 0x80 {
            return Ok(value);
        }
    }
    bail!("a number longer than 64 bits at byte {at}")
}

/// The sections of a wasm module, in order.
fn sections(module: &[u8]) -> anyhow::Result<Vec<Section<'_>>> {
    if module.get(..8) != Some(b"\0asm\x01\0\0\0".as_slice()) {
        bail!("not a wasm module (version 1)");
    }
    let mut at = 8;
    let mut out = Vec::new();
    while at < module.len() {
        let id = module[at];
        at += 1;
        let len = usize::try_from(leb(module, &mut at)?)?;
        let Some(body) = module.get(at..at + len) else {
            bail!("section {id} ({len} bytes at byte {at}) runs past the end of the module");
        };
        out.push((id, body));
        at += len;
    }
    Ok(out)
}

/// Whether two builds of the same sources agree where a build is deterministic (see the
/// module's docs); the error names the first difference.
fn same_shape(a: &[u8], b: &[u8]) -> anyhow::Result<()> {
    let (sa, sb) = (sections(a)?, sections(b)?);
    let ids = |s: &[Section<'_>]| s.iter().map(|(id, _)| *id).collect::<Vec<_>>();
    if ids(&sa) != ids(&sb) {
        bail!("sections {:?} against {:?}", ids(&sa), ids(&sb));
    }
    for ((id, x), (_, y)) in sa.iter().zip(&sb) {
        match id {
            10 | 11 => {
                let (mut i, mut j) = (0, 0);
                let (nx, ny) = (leb(x, &mut i)?, leb(y, &mut j)?);
                if nx != ny {
                    bail!("section {id} holds {nx} entries against {ny}");
                }
                let (lx, ly) = (x.len() as f64, y.len() as f64);
                if (lx - ly).abs() > SIZE_SLACK * lx.max(ly) {
                    bail!(
                        "section {id} is {} bytes against {} (more than the {SIZE_SLACK} two \
                         builds of the same sources may differ by)",
                        x.len(),
                        y.len()
                    );
                }
            }
            _ if x != y => bail!(
                "section {id} differs ({} bytes against {})",
                x.len(),
                y.len()
            ),
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A module of a type section and code and data sections of the given contents.
    fn module(types: &[u8], code: &[u8], data: &[u8]) -> Vec<u8> {
        let mut m = b"\0asm\x01\0\0\0".to_vec();
        for (id, body) in [(1u8, types), (10, code), (11, data)] {
            m.push(id);
            m.push(u8::try_from(body.len()).unwrap());
            m.extend_from_slice(body);
        }
        m
    }

    #[test]
    fn reordered_data_of_the_same_size_passes() {
        let a = module(&[1, 2], &[1, 9, 9], &[2, 5, 6, 7, 8]);
        let b = module(&[1, 2], &[1, 9, 8], &[2, 8, 7, 6, 5]);
        same_shape(&a, &b).unwrap();
    }

    #[test]
    fn a_different_type_section_fails() {
        let a = module(&[1, 2], &[1, 9], &[1, 5]);
        let b = module(&[1, 3], &[1, 9], &[1, 5]);
        let err = same_shape(&a, &b).unwrap_err().to_string();
        assert!(err.contains("section 1 differs"), "{err}");
    }

    #[test]
    fn a_different_number_of_functions_fails() {
        let a = module(&[1], &[2, 9, 9], &[1, 5]);
        let b = module(&[1], &[1, 9, 9], &[1, 5]);
        let err = same_shape(&a, &b).unwrap_err().to_string();
        assert!(err.contains("2 entries against 1"), "{err}");
    }

    #[test]
    fn a_larger_data_section_fails() {
        let a = module(&[1], &[1, 9], &[1, 5]);
        let b = module(&[1], &[1, 9], &[1, 5, 6]);
        let err = same_shape(&a, &b).unwrap_err().to_string();
        assert!(err.contains("2 bytes against 3"), "{err}");
    }

    #[test]
    fn not_wasm_is_refused() {
        assert!(sections(b"hello world").is_err());
        assert!(sections(b"\0asm\x01\0\0\0\x01\x05ab").is_err());
    }

    #[test]
    fn the_committed_module_parses() {
        let root = util::workspace_root().unwrap();
        let m =
            std::fs::read(root.join("crates/ravi-sandbox-guest/prebuilt/ravi_sandbox_guest.wasm"))
                .unwrap();
        let ids: Vec<u8> = sections(&m).unwrap().iter().map(|(id, _)| *id).collect();
        assert!(ids.contains(&10) && ids.contains(&11), "{ids:?}");
        same_shape(&m, &m).unwrap();
    }
}
