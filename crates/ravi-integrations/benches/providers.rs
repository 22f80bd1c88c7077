//! Provider benchmarks (filled in below).
fn main() {}
