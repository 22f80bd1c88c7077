//! One module per scenario area.

mod access;
mod blob_stores;
mod capability_search;
mod deferred_loading;
mod durable;
mod invoker_approvals;
mod invoker_drops;
mod invoker_gates;
mod invoker_properties;
mod react;
mod schema_props;
mod schemas;
mod tool_macro;
