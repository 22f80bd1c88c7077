//! The `ravi` command.
fn main() {}
