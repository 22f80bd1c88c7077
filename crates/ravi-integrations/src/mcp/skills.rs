//! Skills of an MCP server (SEP-2640, the `io.modelcontextprotocol/skills` extension), read
//! into Ravi's skill system.
//!
//! [`McpClient::skills`] lists what a server offers without reading any of it (a host must not
//! fetch a skill's files ahead of need). [`McpClient::load_skill`] fetches one skill's
//! `SKILL.md` when it is loaded, and uses it only once verified: its size and sha256 digest
//! must be the ones the listing promised, and its front matter, parsed, must equal the listed
//! front matter field by field. A skill whose files the server lists as `dynamic` cannot be
//! verified and is refused. The skill is then an ordinary [`Skill`]: its instructions join
//! the system prompt and its `allowed_tools` bind the calls the invoker lets through, as for
//! a skill from disk.

use ravi_kernel::Skill;
use rmcp::model::{ReadResourceRequestParams, ResourceContents, SkillResource, SkillResources};
use serde_json::Value;

use super::client::McpClient;
use super::error::McpError;

/// One skill an MCP server lists, not fetched yet.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct RemoteSkill {
    /// The server's name (as attached).
    pub server: String,
    /// The `skill://…/SKILL.md` URI.
    pub uri: String,
    /// The skill's name.
    pub name: String,
    /// What it is for.
    pub description: String,
    /// The front matter as listed (every field).
    pub frontmatter: Value,
    /// Its files with their promised digest and size; `None` when the server lists them as
    /// `dynamic` (then nothing can be verified).
    files: Option<Vec<SkillResource>>,
}

impl RemoteSkill {
    /// The skill's files as listed: URI, `sha256:` digest, size in bytes.
    pub fn files(&self) -> Vec<(String, String, u64)> {
        self.files
            .iter()
            .flatten()
            .map(|f| (f.uri.clone(), f.digest.clone(), f.size))
            .collect()
    }
}

fn skill_error(server: &str, uri: &str, why: impl std::fmt::Display) -> McpError {
    McpError::Request {
        server: server.to_owned(),
        what: format!("loading skill {uri}"),
        reason: why.to_string(),
    }
}

impl McpClient {
    /// The skills the server offers (`skills/list`, every page); empty when it does not
    /// declare the skills extension. Nothing of them is fetched.
    pub async fn skills(&self) -> Result<Vec<RemoteSkill>, McpError> {
        let peer = self.peer().await?;
        let offers = peer
            .peer_info()
            .is_some_and(|i| i.capabilities.supports_skills());
        if !offers {
            return Ok(Vec::new());
        }
        let listed = peer
            .list_all_skills()
            .await
            .map_err(|e| McpError::Request {
                server: self.name().to_owned(),
                what: "skills/list".into(),
                reason: e.to_string(),
            })?;
        Ok(listed
            .into_iter()
            .map(|s| RemoteSkill {
                server: self.name().to_owned(),
                uri: s.uri.clone(),
                name: s.frontmatter.name.clone(),
                description: s.frontmatter.description.clone(),
                frontmatter: serde_json::to_value(&s.frontmatter).unwrap_or(Value::Null),
                files: match s.resources {
                    SkillResources::Files(files) => Some(files),
                    _ => None,
                },
            })
            .collect())
    }

    /// The skill named `name` among [`skills`](Self::skills), fetched and verified (see
    /// [`load_skill`](Self::load_skill)).
    pub async fn load_skill_named(&self, name: &str) -> Result<Skill, McpError> {
        let listed = self.skills().await?;
        let Some(skill) = listed.iter().find(|s| s.name == name) else {
            let names: Vec<&str> = listed.iter().map(|s| s.name.as_str()).collect();
            return Err(skill_error(
                self.name(),
                name,
                format!(
                    "the server offers no skill `{name}` (it offers: {})",
                    if names.is_empty() {
                        "none".to_owned()
                    } else {
                        names.join(", ")
                    }
                ),
            ));
        };
        self.load_skill(skill).await
    }

    /// Fetches `skill`'s `SKILL.md` and makes it a [`Skill`], once verified: the bytes read
    /// must have the listed size and digest, and the parsed front matter must equal the
    /// listed one. Anything else is refused, and nothing of it used.
    pub async fn load_skill(&self, skill: &RemoteSkill) -> Result<Skill, McpError> {
        let bytes = self.read_skill_file(skill, &skill.uri).await?;
        let text = String::from_utf8(bytes)
            .map_err(|_| skill_error(self.name(), &skill.uri, "SKILL.md is not UTF-8 text"))?;
        let path = std::path::Path::new(&skill.uri);
        let front = ravi_agents::skills::frontmatter(path, &text)
            .map_err(|e| skill_error(self.name(), &skill.uri, e))?;
        if let Some(field) = first_difference(&skill.frontmatter, &front) {
            return Err(skill_error(
                self.name(),
                &skill.uri,
                format!("its front matter differs from the listed entry at `{field}`: not loaded"),
            ));
        }
        let mut loaded = ravi_agents::skills::parse_skill(path, &text)
            .map_err(|e| skill_error(self.name(), &skill.uri, e))?;
        loaded.path = None;
        Ok(loaded)
    }

    /// Reads file `uri` of `skill`, verified against the size and digest the listing gave
    /// it. A file the listing does not name, or a skill listed as `dynamic`, is refused.
    pub async fn read_skill_file(
        &self,
        skill: &RemoteSkill,
        uri: &str,
    ) -> Result<Vec<u8>, McpError> {
        let Some(files) = &skill.files else {
            return Err(skill_error(
                self.name(),
                uri,
                "the server lists this skill's files as dynamic, with no digests, so Ravi \
                 cannot verify them and does not use them",
            ));
        };
        let Some(entry) = files.iter().find(|f| f.uri == uri) else {
            return Err(skill_error(
                self.name(),
                uri,
                "the skill's listing does not name this file",
            ));
        };
        let peer = self.peer().await?;
        let read = peer
            .read_resource(ReadResourceRequestParams::new(uri))
            .await
            .map_err(|e| McpError::Request {
                server: self.name().to_owned(),
                what: format!("resources/read {uri}"),
                reason: e.to_string(),
            })?;
        let bytes = match read.contents.first() {
            Some(ResourceContents::TextResourceContents { text, .. }) => text.as_bytes().to_vec(),
            Some(ResourceContents::BlobResourceContents { blob, .. }) => {
                use base64::Engine as _;
                base64::engine::general_purpose::STANDARD
                    .decode(blob)
                    .map_err(|e| skill_error(self.name(), uri, format!("bad base64: {e}")))?
            }
            _ => return Err(skill_error(self.name(), uri, "the server sent no contents")),
        };
        entry
            .verify(&bytes)
            .map_err(|e| skill_error(self.name(), uri, format!("verification failed: {e}")))?;
        Ok(bytes)
    }
}

/// The first field where two front matters differ (`None`: equal).
fn first_difference(listed: &Value, read: &Value) -> Option<String> {
    let (Some(a), Some(b)) = (listed.as_object(), read.as_object()) else {
        return (listed != read).then(|| "(the whole front matter)".to_owned());
    };
    a.keys()
        .chain(b.keys())
        .find(|k| a.get(*k) != b.get(*k))
        .cloned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn front_matters_are_compared_field_by_field() {
        let listed = json!({"name": "pdf", "description": "Fill PDFs"});
        assert_eq!(first_difference(&listed, &listed.clone()), None);
        assert_eq!(
            first_difference(
                &listed,
                &json!({"name": "pdf", "description": "Steal PDFs"})
            ),
            Some("description".into())
        );
        assert_eq!(
            first_difference(
                &listed,
                &json!({"name": "pdf", "description": "Fill PDFs", "allowed_tools": ["shell"]})
            ),
            Some("allowed_tools".into())
        );
    }
}
