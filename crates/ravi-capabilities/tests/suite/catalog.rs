//! Catalog discovery: built-ins and a user tool dropped into this test binary are found with
//! no registration call; workspace binding; lookups by alias, category and tag.

use ravi_capabilities::{BUILTIN_NAMES, Catalog, HttpPolicy, builtin_tools};
use ravi_kernel::{AnyTool, ToolContext, ToolRegistry, ToolRisk};
use ravi_test_support::tools::{Outcome, TestTool};
use serde_json::json;

/// A user tool: declared here, registered with one line, never added anywhere by hand.
fn greeter() -> AnyTool {
    TestTool::new("greeter", |_, args| {
        Outcome::text(format!("hello, {}", args["name"].as_str().unwrap_or("?")))
    })
    .with_description("Greet someone by name.")
    .with_schema(
        json!({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}),
    )
    .into_any()
}

ravi_agents::register_tool!(name: "greeter", category: "social/greetings", tags: ["demo"],
    build: greeter);

// A user tool written as a plain async function: the attribute alone makes it discoverable,
// there is no `register_tool!` line and no call that adds it anywhere.
/// Shout a word back in capitals.
#[ravi_agents::tool(category = "demo/text", tags = ["shout", "text"], aliases = ["yell"])]
async fn shout(word: String) -> String {
    word.to_uppercase()
}

// A broken registration whose builder makes a tool of another name: reported, not listed.
ravi_agents::register_tool!(name: "misnamed", category: "demo", tags: [],
    build: greeter);

#[test]
fn discover_finds_builtins_and_dropped_in_tools() {
    let catalog = Catalog::discover();
    for name in BUILTIN_NAMES {
        let entry = catalog
            .entry(name)
            .unwrap_or_else(|| panic!("{name} not discovered"));
        assert!(entry.builtin);
        assert!(
            !entry.category.is_empty() && !entry.tags.is_empty(),
            "{name}"
        );
    }
    let greeter = catalog.entry("greeter").unwrap();
    assert!(!greeter.builtin);
    assert_eq!(greeter.category, "social/greetings");
    assert!(catalog.entry("misnamed").is_none());
    assert!(
        catalog.skipped().iter().any(|s| s.contains("`misnamed`")),
        "{:?}",
        catalog.skipped()
    );
    let names: Vec<_> = catalog
        .entries()
        .iter()
        .map(|e| e.name().to_owned())
        .collect();
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(names, sorted, "entries are sorted by name");
}

#[tokio::test]
async fn a_tool_attribute_function_is_discovered_without_registration() {
    let dir = tempfile::tempdir().unwrap();
    for catalog in [
        Catalog::discover(),
        Catalog::discover_in(dir.path(), HttpPolicy::default()).unwrap(),
    ] {
        let entry = catalog
            .entry("shout")
            .expect("the #[tool] function is discovered");
        assert!(!entry.builtin);
        assert_eq!(entry.category, "demo/text");
        assert_eq!(entry.tags, ["shout", "text"]);
        assert_eq!(catalog.entry("yell").unwrap().name(), "shout");
        assert_eq!(entry.tool.risk(), ToolRisk::Safe);
        assert_eq!(entry.tool.description(), "Shout a word back in capitals.");
        let out = catalog
            .get("shout")
            .unwrap()
            .as_function()
            .unwrap()
            .execute(&ToolContext::default(), json!({"word": "hello"}))
            .await
            .unwrap();
        assert_eq!(out.text_content(), "HELLO");
        assert!(catalog.toolbox().unwrap().contains("shout"));
        let registry = catalog.capability_registry().unwrap();
        assert_eq!(
            registry.browse("demo").len(),
            1,
            "listed under its category"
        );
    }
}

#[test]
fn lookups_by_alias_category_and_tag() {
    let catalog = Catalog::discover();
    assert_eq!(catalog.entry("ls").unwrap().name(), "list_files");
    assert_eq!(catalog.entry("bash").unwrap().name(), "shell");
    let mut fs: Vec<_> = catalog
        .in_category("system")
        .iter()
        .map(|e| e.name().to_owned())
        .collect();
    fs.sort();
    assert_eq!(
        fs,
        [
            "delete_file",
            "file_exists",
            "list_files",
            "read_file",
            "write_file"
        ]
    );
    assert_eq!(catalog.in_category("system/files").len(), 5);
    assert!(
        catalog.in_category("system/file").is_empty(),
        "a category matches whole segments"
    );
    assert!(
        catalog
            .with_tag("NETWORK")
            .iter()
            .any(|e| e.name() == "http_get")
    );
    let cats = catalog.categories();
    assert_eq!(cats["general/math"], ["calculator"]);
    // As a registry.
    assert!(catalog.contains("read_result"));
    assert_eq!(catalog.get("rm").unwrap().risk(), ToolRisk::Critical);
    let toolbox = catalog.toolbox().unwrap();
    assert_eq!(toolbox.len(), catalog.entries().len());
    assert!(toolbox.contains("greeter") && toolbox.contains("http_get"));
    let safe = catalog.clone().filter(|e| e.tool.risk() == ToolRisk::Safe);
    assert!(
        safe.entries()
            .iter()
            .all(|e| e.tool.risk() == ToolRisk::Safe)
    );
    assert!(safe.entry("calculator").is_some() && safe.entry("shell").is_none());
}

#[tokio::test]
async fn discover_in_binds_the_builtins_to_the_workspace() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = Catalog::discover_in(dir.path(), HttpPolicy::default()).unwrap();
    let write = catalog.get("write_file").unwrap();
    let out = write
        .as_function()
        .unwrap()
        .execute(
            &ToolContext::default(),
            json!({"path": "hello.txt", "content": "hi"}),
        )
        .await
        .unwrap();
    assert!(!out.is_error);
    assert_eq!(
        std::fs::read_to_string(dir.path().join("hello.txt")).unwrap(),
        "hi"
    );
    assert!(
        catalog.entry("greeter").is_some(),
        "user tools stay in a bound catalog"
    );
    let err = Catalog::discover_in("/no/such/workspace", HttpPolicy::default()).unwrap_err();
    assert!(err.to_string().contains("/no/such/workspace"), "{err}");
}

#[test]
fn capability_registry_browses_and_searches_the_catalog() {
    let catalog = Catalog::discover();
    let registry = catalog.capability_registry().unwrap();
    assert_eq!(registry.len(), catalog.entries().len());
    let files: Vec<_> = registry
        .browse("system")
        .iter()
        .map(|e| e.name.clone())
        .collect();
    assert_eq!(files.len(), 5, "{files:?}");
    assert_eq!(registry.get_tool("rm").unwrap().name(), "delete_file");
    let hits = registry.search("run a command in the terminal", 3);
    assert!(
        hits.iter().any(|h| h.entry.name == "shell"),
        "{:?}",
        hits.iter().map(|h| &h.entry.name).collect::<Vec<_>>()
    );
    let hits = registry.search("download a web page", 3);
    assert_eq!(hits[0].entry.name, "http_get");
}

#[test]
fn builtin_tools_lists_every_builtin_once() {
    let names: Vec<_> = builtin_tools()
        .iter()
        .map(|t| t.name().to_owned())
        .collect();
    assert_eq!(names, BUILTIN_NAMES);
}
