//! One module per scenario area.

#[cfg(feature = "code-mode")]
mod agent_code_mode;
mod backend;
mod calculator;
mod catalog;
#[cfg(feature = "code-mode")]
mod chain_tool;
#[cfg(feature = "code-mode")]
mod corpus;
#[cfg(feature = "code-mode-cpython")]
mod cpython;
mod escape_corpus;
mod file_tools;
mod golden;
mod http_get;
mod read_result;
#[cfg(feature = "code-mode")]
mod sandbox;
mod through_invoker;
