//! `ravi keys`: API keys for `ravi serve --http --auth keys`. A key's secret is printed once,
//! at creation, and only its SHA-256 digest is stored; its principal is `key:NAME`.

use anyhow::bail;
use clap::Subcommand;
use ravi_agents::access::{AccessRule, RateSpec, key_digest, new_key_secret};
use ravi_kernel::{ApiKey, ToolRisk};
use serde_json::json;

use super::approvals::{StoreArgs, relative};
use crate::Exit;
use crate::setup::runtime;
use crate::table::Table;

/// `ravi keys …`.
#[derive(Debug, Subcommand)]
pub enum KeysCommand {
    /// Make a key and print its secret (shown this once).
    Create {
        /// The key's name (letters, digits, `-`, `_`); its principal is `key:NAME`.
        name: String,
        /// The tools it may use (patterns, comma-separated: `read_*,gh__*`); default: every
        /// tool the gateway's policy allows it.
        #[arg(long, value_delimiter = ',', value_name = "PATTERNS")]
        tools: Option<Vec<String>>,
        /// The highest risk it may use: safe, sensitive, high or critical.
        #[arg(long, value_name = "LEVEL")]
        max_risk: Option<ToolRisk>,
        /// How many calls it may make: `N/s`, `N/min` or `N/h` (bursts up to N); beyond it a
        /// call is refused with the time to retry after.
        #[arg(long, value_name = "SPEC")]
        rate: Option<RateSpec>,
        /// Print `{"name", "principal", "secret"}` as JSON.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        store: StoreArgs,
    },
    /// List the keys (never their secrets).
    List {
        /// Print JSON.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Revoke a key: a running gateway refuses it within a second.
    Revoke {
        /// The key's name.
        name: String,
        #[command(flatten)]
        store: StoreArgs,
    },
}

/// Runs `ravi keys`.
pub fn run(cmd: KeysCommand) -> anyhow::Result<Exit> {
    runtime()?.block_on(async {
        match cmd {
            KeysCommand::Create {
                name,
                tools,
                max_risk,
                rate,
                json,
                store,
            } => {
                if name.is_empty()
                    || !name
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
                {
                    bail!("key name `{name}`: expected letters, digits, `-` and `_`");
                }
                let rule = match (&tools, max_risk, rate) {
                    (None, None, None) => None,
                    _ => {
                        let mut r =
                            AccessRule::tools(tools.clone().unwrap_or_else(|| vec!["*".into()]));
                        if let Some(m) = max_risk {
                            r = r.with_max_risk(m);
                        }
                        r.rate = rate;
                        Some(serde_json::to_value(r)?)
                    }
                };
                let secret = new_key_secret();
                let store = store.open().await?;
                if store.keys().await?.iter().any(|k| k.name == name) {
                    bail!("a key named `{name}` exists already (revoked keys keep their name)");
                }
                store
                    .create_key(&ApiKey::new(&name, key_digest(&secret), rule))
                    .await?;
                if json {
                    println!(
                        "{}",
                        json!({"name": name, "principal": format!("key:{name}"), "secret": secret})
                    );
                } else {
                    println!("{secret}");
                    eprintln!(
                        "ravi: key `{name}` (principal key:{name}) created; the secret above is \
                         shown this once: clients send it as `Authorization: Bearer SECRET`"
                    );
                }
                Ok(Exit::Ok)
            }
            KeysCommand::List { json, store } => {
                let keys = store.open().await?.keys().await?;
                if json {
                    let list: Vec<_> = keys
                        .iter()
                        .map(|k| {
                            json!({"name": k.name, "rule": k.rule, "created_ms": k.created_ms,
                                   "revoked_ms": k.revoked_ms})
                        })
                        .collect();
                    println!("{}", serde_json::to_string_pretty(&list)?);
                } else if keys.is_empty() {
                    println!("no keys");
                } else {
                    let mut t =
                        Table::new(["NAME", "STATE", "TOOLS", "MAX RISK", "RATE", "CREATED"]);
                    for k in &keys {
                        let rule = k.rule.clone().unwrap_or_default();
                        let tools = rule["tools"]
                            .as_array()
                            .map(|a| {
                                a.iter()
                                    .filter_map(|v| v.as_str())
                                    .collect::<Vec<_>>()
                                    .join(",")
                            })
                            .unwrap_or_else(|| "(policy)".into());
                        t.row([
                            &k.name,
                            if k.revoked_ms.is_some() {
                                "revoked"
                            } else {
                                "active"
                            },
                            &tools,
                            rule["max_risk"].as_str().unwrap_or("-"),
                            rule["rate"].as_str().unwrap_or("-"),
                            &relative(k.created_ms),
                        ]);
                    }
                    print!("{t}");
                }
                Ok(Exit::Ok)
            }
            KeysCommand::Revoke { name, store } => {
                if store.open().await?.revoke_key(&name).await? {
                    println!("revoked key `{name}`");
                    Ok(Exit::Ok)
                } else {
                    bail!("no active key named `{name}` (`ravi keys list` lists them)")
                }
            }
        }
    })
}
