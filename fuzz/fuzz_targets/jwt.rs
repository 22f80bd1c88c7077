//! See `ravi_fuzz_targets::jwt`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    ravi_fuzz_targets::jwt(data);
});
