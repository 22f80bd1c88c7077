//! See `ravi_fuzz_targets::workspace_path`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    ravi_fuzz_targets::workspace_path(data);
});
