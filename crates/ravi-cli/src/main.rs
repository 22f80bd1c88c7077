//! The `ravi` command: Ravi's tools layer from a terminal.
//!
//! Exit codes are part of the interface: 0 success, 1 a tool or script error, 2 a usage or
//! configuration error, 3 a timeout, limit or cancellation, 4 a denied call.

#![allow(clippy::print_stdout, reason = "a command-line tool prints")]

mod approval;
mod blobs;
mod commands;
mod config;
mod memory;
mod setup;
mod store;
mod table;
mod telemetry;
mod tokens;

use clap::{Parser, Subcommand};

/// Ravi: define tools once, run every call through one enforcement pipeline.
#[derive(Debug, Parser)]
#[command(name = "ravi", version, about, long_about = None, propagate_version = true)]
struct Cli {
    /// How `shell` commands are confined by the kernel: `workspace` (the default: read-write in
    /// the workspace and a private temporary folder, the system read-only, no network, limits,
    /// dangerous system calls refused), `strict` (the workspace read-only too) or `off`
    /// (unconfined, on purpose). Default: ravi.toml's `[sandbox.shell] mode`, else `workspace`.
    #[arg(long, global = true, value_name = "strict|workspace|off")]
    sandbox: Option<ravi_confine::Mode>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Print the version of ravi and of its crates (one workspace version for all of them).
    Version,
    /// Inspect the tools Ravi knows.
    #[command(subcommand)]
    Tools(commands::tools::ToolsCommand),
    /// Serve a toolbox over MCP (stdio or streamable HTTP).
    Serve(commands::serve::ServeArgs),
    /// Run a code-mode Python script against the built-in toolbox.
    Run(commands::run::RunArgs),
    /// Run a model with tools (the ReAct loop), approving risky calls on the terminal.
    Agent(commands::agent::AgentArgs),
    /// Decide the approvals queued in the durable store (`--approve queue`).
    #[command(subcommand)]
    Approvals(commands::approvals::ApprovalsCommand),
    /// API keys for `ravi serve --http --auth keys`.
    #[command(subcommand)]
    Keys(commands::keys::KeysCommand),
    /// Who called what: the journal's calls with principal, argument digest, outcome and
    /// approver.
    Audit(commands::audit::AuditArgs),
    /// List, show and resume the runs journaled in the durable store.
    #[command(subcommand)]
    Runs(commands::runs::RunsCommand),
    /// Inspect skills (SKILL.md prompt packages).
    #[command(subcommand)]
    Skills(commands::skills::SkillsCommand),
}

/// The process exit codes (see the crate docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// Success.
    Ok = 0,
    /// A tool or script failed.
    ToolError = 1,
    /// Bad usage or configuration.
    Usage = 2,
    /// A timeout, limit or cancellation stopped the run.
    Limit = 3,
    /// A call was denied (no approval, a guardrail).
    Denied = 4,
}

fn main() {
    let cli = Cli::parse();
    setup::set_sandbox_flag(cli.sandbox);
    // The crash tests' build arms crash points from FAILPOINTS; every other build ignores it.
    ravi_agents::durable::arm_crash_points();
    // Before any HTTP client is built (the OTLP exporter's is the first): rustls' provider.
    ravi_integrations::ensure_tls_provider();
    let (endpoint, capture) = match &cli.command {
        Command::Serve(args) => (args.otlp_endpoint.as_deref(), args.otlp_capture_content),
        _ => (None, false),
    };
    let telemetry = match telemetry::init(endpoint, capture) {
        Ok(t) => t,
        Err(err) => {
            eprintln!("ravi: error: {err:#}");
            std::process::exit(Exit::Usage as i32);
        }
    };
    let result = match cli.command {
        Command::Version => {
            // Every Ravi crate takes `version.workspace`, so the CLI's version is theirs too.
            let v = env!("CARGO_PKG_VERSION");
            println!("ravi {v}");
            println!(
                "crates: ravi-kernel {v}, ravi-macros {v}, ravi-agents {v}, ravi-capabilities {v}, \
                 ravi-integrations {v}, ravi-gateway {v}, ravi-console {v}, ravi-providers {v}, \
                 ravi-store-sql {v}, ravi-blobs-s3 {v}"
            );
            Ok(Exit::Ok)
        }
        Command::Tools(cmd) => commands::tools::run(cmd),
        Command::Serve(args) => commands::serve::run(args),
        Command::Run(args) => commands::run::run(args),
        Command::Agent(args) => commands::agent::run(args),
        Command::Skills(cmd) => commands::skills::run(cmd),
        Command::Approvals(cmd) => commands::approvals::run(cmd),
        Command::Runs(cmd) => commands::runs::run(cmd),
        Command::Keys(cmd) => commands::keys::run(cmd),
        Command::Audit(args) => commands::audit::run(args),
    };
    let code = match result {
        Ok(exit) => exit as i32,
        Err(err) => {
            eprintln!("ravi: error: {err:#}");
            Exit::Usage as i32
        }
    };
    telemetry.shutdown();
    std::process::exit(code);
}
