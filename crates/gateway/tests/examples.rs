//! Every shipped descriptor is valid, has working names and guides, and every tool plans
//! (dry-runs) with sample arguments; JXA programs pass Node's syntax check.

use std::path::PathBuf;
use std::time::Duration;

use aai_descriptor::{Descriptor, Platform, naming};
use aai_executor::{Executors, Invocation};
use serde_json::{Map, Value, json};

/// The platform a shipped descriptor is for: its only section.
fn platform_of(descriptor: &Descriptor) -> Platform {
    let platforms: Vec<Platform> = Platform::ALL
        .into_iter()
        .filter(|&p| descriptor.tools(p).is_some())
        .collect();
    assert_eq!(
        platforms.len(),
        1,
        "{}: one section each",
        descriptor.app_id
    );
    platforms[0]
}

/// Arguments for every parameter: the default, else a sample of the type.
fn sample_args(schema: Option<&Value>) -> Map<String, Value> {
    let mut args = Map::new();
    let properties = schema
        .and_then(|s| s.get("properties"))
        .and_then(Value::as_object);
    for (name, property) in properties.into_iter().flatten() {
        let value = property.get("default").cloned().unwrap_or_else(|| {
            match property.get("type").and_then(Value::as_str) {
                Some("integer") => json!(3),
                Some("number") => json!(1.5),
                Some("boolean") => json!(true),
                _ => json!("sample 'quoted' \"text\" $(id)"),
            }
        });
        args.insert(name.clone(), value);
    }
    args
}

fn examples() -> Vec<PathBuf> {
    let root = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/apps"));
    let mut files: Vec<PathBuf> = std::fs::read_dir(&root)
        .expect("examples/apps")
        .map(|e| e.expect("entry").path().join("aai.json"))
        .collect();
    files.sort();
    files
}

#[test]
fn every_example_is_valid_and_sits_in_a_folder_named_after_its_app_id() {
    let files = examples();
    assert!(
        files.len() >= 6,
        "expected the shipped examples, found {files:?}"
    );
    for file in files {
        let bytes = std::fs::read(&file).expect("read");
        let descriptor = aai_descriptor::parse(&file.display().to_string(), &bytes)
            .unwrap_or_else(|e| panic!("{e}"));
        let folder = file
            .parent()
            .and_then(|p| p.file_name())
            .and_then(|n| n.to_str())
            .expect("folder");
        assert_eq!(descriptor.app_id, folder, "{}", file.display());
        let tools = descriptor.tools(platform_of(&descriptor)).expect("section");
        assert!(!tools.is_empty());
        let slug = &naming::assign_slugs(&[descriptor.app_id.as_str()])[0];
        assert!(naming::is_valid_tool_name(slug));
        let guide = aai_descriptor::guide::guide(&descriptor, &tools);
        assert!(guide.contains("Example: aai_exec"), "{guide}");
    }
}

#[test]
fn every_example_tool_dry_runs_with_sample_arguments() {
    let executors = Executors::new();
    let dir = tempfile::tempdir().expect("dir");
    let mut jxa = 0;
    for file in examples() {
        let bytes = std::fs::read(&file).expect("read");
        let descriptor = aai_descriptor::parse("t", &bytes).expect("valid");
        let platform = platform_of(&descriptor);
        for tool in descriptor.tools(platform).expect("tools") {
            let schema = tool
                .parameters
                .as_ref()
                .map(aai_descriptor::Parameters::schema);
            let args = sample_args(schema.as_ref());
            let invocation =
                Invocation::new(&descriptor, &tool.name, &args, Duration::from_secs(5));
            let plan = executors
                .plan(platform, invocation)
                .unwrap_or_else(|e| panic!("{}:{}: {e}", descriptor.app_id, tool.name));
            let is_jxa = plan["argv"].get(1) == Some(&json!("JavaScript"));
            if platform == Platform::Linux {
                assert!(plan["dbus"]["method"].is_string(), "{plan}");
                continue;
            }
            if platform == Platform::Web {
                let url = plan["http"]["url"].as_str().expect("url");
                assert!(url.starts_with("https://") && !url.contains("${"), "{plan}");
                continue;
            }
            assert!(plan["program"].is_string(), "{plan}");
            if is_jxa {
                // The program osascript would get must at least be valid JavaScript.
                let program = dir
                    .path()
                    .join(format!("{}-{}.js", descriptor.app_id, tool.name));
                std::fs::write(&program, plan["stdin"].as_str().expect("program")).expect("write");
                let check = std::process::Command::new("node")
                    .arg("--check")
                    .arg(&program)
                    .output()
                    .expect("node is needed: apt-get install -y nodejs");
                assert!(
                    check.status.success(),
                    "{}:{}: {}",
                    descriptor.app_id,
                    tool.name,
                    String::from_utf8_lossy(&check.stderr)
                );
                jxa += 1;
            }
        }
    }
    assert!(jxa >= 10, "only {jxa} JXA tools were checked");
}
