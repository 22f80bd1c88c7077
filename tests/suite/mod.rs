//! One module per scenario area.

mod one_pipeline;
mod renderers;
