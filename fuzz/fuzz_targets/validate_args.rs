//! See `ravi_fuzz_targets::validate_args`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    ravi_fuzz_targets::validate_args(data);
});
