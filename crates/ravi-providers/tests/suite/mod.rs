//! One module per scenario area.

mod providers_agent;
mod providers_deferred;
mod providers_env;
mod providers_wire;
