//! One module per top-level command.

pub mod run;
pub mod tools;
