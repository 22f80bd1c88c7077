//! One module per top-level command.

pub mod agent;
pub mod tools;
