//! Every shipped descriptor is valid, offered on Linux, and has working names and guides.

use std::path::PathBuf;

use aai_descriptor::{Platform, naming};

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
        let tools = descriptor.tools(Platform::Linux).expect("linux section");
        assert!(!tools.is_empty());
        let slug = &naming::assign_slugs(&[descriptor.app_id.as_str()])[0];
        assert!(naming::is_valid_tool_name(slug));
        let guide = aai_descriptor::guide::guide(&descriptor, &tools);
        assert!(guide.contains("Example: aai_exec"), "{guide}");
    }
}
