//! Skills from disk: a directory of `SKILL.md` files, each a YAML front matter (name,
//! description, version, allowed_tools) followed by the instructions, and the system prompt
//! they compose into.
//!
//! ```text
//! skills/
//!   code-review/SKILL.md
//!   release-notes/SKILL.md
//! ```
//!
//! ```
//! let dir = tempfile::tempdir().unwrap();
//! std::fs::create_dir(dir.path().join("review")).unwrap();
//! std::fs::write(dir.path().join("review/SKILL.md"), "---\nname: review\n\
//!     description: Review a change.\nallowed_tools: [read_file, grep]\n---\n\
//!     Read the diff, then comment on risks first.\n").unwrap();
//! let skills = ravi_agents::skills::load_skills_dir(dir.path()).unwrap();
//! assert_eq!(skills[0].allowed_tools.as_deref(), Some(&["read_file".to_string(), "grep".to_string()][..]));
//! let prompt = ravi_agents::skills::compose_system_prompt("You are a helpful engineer.", &skills);
//! assert!(prompt.ends_with("Read the diff, then comment on risks first."));
//! ```
//!
//! Attaching skills to an agent is three steps: `compose_system_prompt` for the prompt,
//! [`Toolbox::for_skills`](crate::Toolbox::for_skills) for the tools the model sees, and the
//! invoker's skill gate (using [`Skill::allows`]) for the calls it may make.

use std::path::{Path, PathBuf};

use ravi_kernel::Skill;
use serde_yaml::Value as Yaml;

/// The file name a skill lives in.
pub const SKILL_FILE: &str = "SKILL.md";

/// Why a skill could not be loaded; every variant names the file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SkillError {
    /// The file or directory could not be read.
    #[error("{}: {source}", path.display())]
    Io {
        /// What was being read.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The file does not start with a `---` front matter block.
    #[error("{}: no YAML front matter; the file must start with `---`, the fields, then `---`", path.display())]
    NoFrontMatter {
        /// The skill file.
        path: PathBuf,
    },
    /// The front matter is not valid YAML.
    #[error("{}: front matter is not valid YAML: {message}", path.display())]
    Yaml {
        /// The skill file.
        path: PathBuf,
        /// The parser's message (with line and column).
        message: String,
    },
    /// A field is missing or has the wrong type or value.
    #[error("{}: field `{field}`: {problem}", path.display())]
    Field {
        /// The skill file.
        path: PathBuf,
        /// The front matter field.
        field: String,
        /// What is wrong and what was expected.
        problem: String,
    },
    /// Two skills have the same name.
    #[error("skill `{name}` is defined twice: {} and {}", first.display(), second.display())]
    Duplicate {
        /// The shared name.
        name: String,
        /// The first file.
        first: PathBuf,
        /// The second file.
        second: PathBuf,
    },
}

fn field_err(path: &Path, field: &str, problem: impl Into<String>) -> SkillError {
    SkillError::Field {
        path: path.to_owned(),
        field: field.to_owned(),
        problem: problem.into(),
    }
}

fn kind(v: &Yaml) -> &'static str {
    match v {
        Yaml::Null => "nothing",
        Yaml::Bool(_) => "a boolean",
        Yaml::Number(_) => "a number",
        Yaml::String(_) => "a string",
        Yaml::Sequence(_) => "a list",
        Yaml::Mapping(_) => "a mapping",
        Yaml::Tagged(_) => "a tagged value",
    }
}

/// Splits `---\n<yaml>\n---\n<body>`; `None` without front matter.
fn split_front_matter(text: &str) -> Option<(&str, &str)> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let rest = text
        .strip_prefix("---\r\n")
        .or_else(|| text.strip_prefix("---\n"))?;
    let mut offset = 0;
    for line in rest.split_inclusive('\n') {
        if line.trim_end() == "---" {
            return Some((&rest[..offset], &rest[offset + line.len()..]));
        }
        offset += line.len();
    }
    None
}

/// The front matter of a skill file's text as JSON (every field, as written): what a host
/// compares, field by field, with the entry a server listed before it uses a fetched skill.
pub fn frontmatter(path: &Path, text: &str) -> Result<serde_json::Value, SkillError> {
    let (front, _) = split_front_matter(text).ok_or_else(|| SkillError::NoFrontMatter {
        path: path.to_owned(),
    })?;
    serde_yaml::from_str(front).map_err(|e| SkillError::Yaml {
        path: path.to_owned(),
        message: e.to_string(),
    })
}

/// Parses one skill file's text; `path` is used in errors and recorded on the skill.
pub fn parse_skill(path: &Path, text: &str) -> Result<Skill, SkillError> {
    let (front, body) = split_front_matter(text).ok_or_else(|| SkillError::NoFrontMatter {
        path: path.to_owned(),
    })?;
    let yaml: Yaml = serde_yaml::from_str(front).map_err(|e| SkillError::Yaml {
        path: path.to_owned(),
        message: e.to_string(),
    })?;
    let map = match yaml {
        Yaml::Mapping(m) => m,
        other => {
            return Err(SkillError::Yaml {
                path: path.to_owned(),
                message: format!("expected a mapping of fields, found {}", kind(&other)),
            });
        }
    };
    let get = |key: &str| map.get(Yaml::String(key.to_owned()));

    let name = match get("name") {
        Some(Yaml::String(s)) if !s.trim().is_empty() => s.trim().to_owned(),
        Some(Yaml::String(_)) => return Err(field_err(path, "name", "is empty")),
        Some(other) => {
            return Err(field_err(
                path,
                "name",
                format!("expected a string, found {}", kind(other)),
            ));
        }
        None => {
            return Err(field_err(
                path,
                "name",
                "is missing (every skill needs a name)",
            ));
        }
    };
    if name.chars().count() > 64
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        return Err(field_err(
            path,
            "name",
            format!("`{name}` must be 1-64 characters of [A-Za-z0-9_-]"),
        ));
    }
    let description = match get("description") {
        Some(Yaml::String(s)) => s.trim().to_owned(),
        Some(other) => {
            return Err(field_err(
                path,
                "description",
                format!("expected a string, found {}", kind(other)),
            ));
        }
        None => {
            return Err(field_err(
                path,
                "description",
                "is missing (say in one line what the skill is for)",
            ));
        }
    };
    let version = match get("version") {
        None | Some(Yaml::Null) => "0.0.0".to_owned(),
        Some(Yaml::String(s)) => s.clone(),
        Some(Yaml::Number(n)) => n.to_string(),
        Some(other) => {
            return Err(field_err(
                path,
                "version",
                format!("expected a string such as \"1.0.0\", found {}", kind(other)),
            ));
        }
    };
    let (tools_key, tools) = match (get("allowed_tools"), get("allowed-tools")) {
        (Some(v), _) => ("allowed_tools", Some(v)),
        (None, Some(v)) => ("allowed-tools", Some(v)),
        (None, None) => ("allowed_tools", None),
    };
    let allowed_tools = match tools {
        None | Some(Yaml::Null) => None,
        Some(Yaml::Sequence(items)) => {
            let mut names = Vec::new();
            for (i, item) in items.iter().enumerate() {
                match item {
                    Yaml::String(s) if !s.trim().is_empty() => names.push(s.trim().to_owned()),
                    other => {
                        return Err(field_err(
                            path,
                            tools_key,
                            format!("item {i} should be a tool name, found {}", kind(other)),
                        ));
                    }
                }
            }
            Some(names)
        }
        // `allowed-tools: read_file, grep` (the comma or space separated form).
        Some(Yaml::String(s)) => Some(
            s.split([',', ' '])
                .map(str::trim)
                .filter(|n| !n.is_empty())
                .map(String::from)
                .collect(),
        ),
        Some(other) => {
            return Err(field_err(
                path,
                tools_key,
                format!("expected a list of tool names, found {}", kind(other)),
            ));
        }
    };
    let instructions = body.trim().to_owned();
    if instructions.is_empty() {
        return Err(field_err(
            path,
            "instructions",
            "the body after the front matter is empty; write the skill's instructions there",
        ));
    }
    Ok(Skill {
        name,
        description,
        instructions,
        allowed_tools,
        path: Some(path.to_owned()),
        version,
    })
}

/// Loads one skill file.
pub fn load_skill_file(path: &Path) -> Result<Skill, SkillError> {
    let text = std::fs::read_to_string(path).map_err(|source| SkillError::Io {
        path: path.to_owned(),
        source,
    })?;
    parse_skill(path, &text)
}

/// Loads every skill under `dir`: `dir/SKILL.md` and `dir/<name>/SKILL.md`, sorted by name.
/// The first bad file fails the load with its path and field; two skills with one name fail
/// too.
pub fn load_skills_dir(dir: &Path) -> Result<Vec<Skill>, SkillError> {
    let io = |source| SkillError::Io {
        path: dir.to_owned(),
        source,
    };
    let mut files = Vec::new();
    let own = dir.join(SKILL_FILE);
    if own.is_file() {
        files.push(own);
    }
    let mut subdirs: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(io)?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    subdirs.sort();
    files.extend(
        subdirs
            .into_iter()
            .map(|d| d.join(SKILL_FILE))
            .filter(|f| f.is_file()),
    );
    let mut skills: Vec<Skill> = Vec::new();
    for f in files {
        let skill = load_skill_file(&f)?;
        if let Some(first) = skills.iter().find(|s| s.name == skill.name) {
            return Err(SkillError::Duplicate {
                name: skill.name.clone(),
                first: first.path.clone().unwrap_or_default(),
                second: f,
            });
        }
        skills.push(skill);
    }
    skills.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(skills)
}

/// The system prompt with each skill's instructions appended under a heading naming it.
pub fn compose_system_prompt(base: &str, skills: &[Skill]) -> String {
    let mut out = base.trim_end().to_owned();
    for s in skills {
        if !out.is_empty() {
            out.push_str("\n\n");
        }
        out.push_str(&format!("## Skill: {}\n", s.name));
        if !s.description.is_empty() {
            out.push_str(&s.description);
            out.push_str("\n\n");
        }
        out.push_str(&s.instructions);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Skill, SkillError> {
        parse_skill(Path::new("skills/x/SKILL.md"), text)
    }

    #[test]
    fn parses_fields_and_body() {
        let s = parse(
            "---\nname: release-notes\ndescription: Write release notes.\nversion: 1.2\nallowed-tools: git_log, read_file\n---\n\nSummarise merged changes.\n",
        )
        .unwrap();
        assert_eq!(s.name, "release-notes");
        assert_eq!(s.version, "1.2");
        assert_eq!(
            s.allowed_tools,
            Some(vec!["git_log".to_string(), "read_file".to_string()])
        );
        assert_eq!(s.instructions, "Summarise merged changes.");
        assert!(s.allows("git_log") && !s.allows("shell"));
    }

    #[test]
    fn errors_name_the_file_and_field() {
        let cases = [
            ("no front matter", "just text", "no YAML front matter"),
            (
                "missing name",
                "---\ndescription: d\n---\nbody",
                "field `name`: is missing",
            ),
            (
                "name type",
                "---\nname: [a]\ndescription: d\n---\nbody",
                "field `name`: expected a string, found a list",
            ),
            (
                "bad name",
                "---\nname: two words\ndescription: d\n---\nbody",
                "field `name`: `two words`",
            ),
            (
                "tools type",
                "---\nname: a\ndescription: d\nallowed_tools: 3\n---\nbody",
                "field `allowed_tools`: expected a list",
            ),
            (
                "tool item",
                "---\nname: a\ndescription: d\nallowed_tools: [ok, 7]\n---\nbody",
                "item 1 should be a tool name",
            ),
            (
                "yaml",
                "---\nname: a\n  bad: : indent\n---\nbody",
                "not valid YAML",
            ),
            (
                "empty body",
                "---\nname: a\ndescription: d\n---\n\n",
                "field `instructions`",
            ),
            ("unterminated", "---\nname: a\n", "no YAML front matter"),
        ];
        for (what, text, needle) in cases {
            let err = parse(text).unwrap_err().to_string();
            assert!(err.starts_with("skills/x/SKILL.md: "), "{what}: {err}");
            assert!(err.contains(needle), "{what}: {err}");
        }
    }

    #[test]
    fn loads_a_directory_and_refuses_duplicates() {
        let dir = tempfile::tempdir().unwrap();
        for (sub, name) in [("b", "beta"), ("a", "alpha")] {
            std::fs::create_dir(dir.path().join(sub)).unwrap();
            std::fs::write(
                dir.path().join(sub).join(SKILL_FILE),
                format!("---\nname: {name}\ndescription: The {name} skill.\n---\nDo {name}.\n"),
            )
            .unwrap();
        }
        std::fs::create_dir(dir.path().join("empty")).unwrap();
        let skills = load_skills_dir(dir.path()).unwrap();
        assert_eq!(
            skills.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(),
            vec!["alpha", "beta"]
        );
        let prompt = compose_system_prompt("Base.", &skills);
        assert_eq!(
            prompt,
            "Base.\n\n## Skill: alpha\nThe alpha skill.\n\nDo alpha.\n\n## Skill: beta\nThe beta skill.\n\nDo beta."
        );
        std::fs::create_dir(dir.path().join("c")).unwrap();
        std::fs::write(
            dir.path().join("c").join(SKILL_FILE),
            "---\nname: alpha\ndescription: again\n---\nx\n",
        )
        .unwrap();
        let err = load_skills_dir(dir.path()).unwrap_err().to_string();
        assert!(err.contains("skill `alpha` is defined twice"), "{err}");
        let err = load_skills_dir(&dir.path().join("missing"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("missing"), "{err}");
    }
}
