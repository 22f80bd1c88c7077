//! See `ravi_fuzz_targets::egress_heads`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    ravi_fuzz_targets::egress_heads(data);
});
