//! See `ravi_fuzz_targets::http_requests`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    ravi_fuzz_targets::http_requests(data);
});
