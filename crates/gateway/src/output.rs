//! Everything the CLI prints on stdout. Server mode never calls into this module: there,
//! stdout carries only MCP frames.
#![allow(clippy::print_stdout)]

use aai_descriptor::LoadError;
use aai_descriptor::Platform;
use aai_gateway::registry::Registry;

/// `--scan`: the offered apps, then every file that was skipped and why.
pub fn scan_report(registry: &Registry, home: &std::path::Path) {
    println!("AAI home: {}", home.display());
    println!(
        "{} app(s) offered on {}:",
        registry.apps.len(),
        Platform::current().key()
    );
    for app in &registry.apps {
        let tools = app
            .descriptor
            .tools(Platform::current())
            .map_or(0, |t| t.len());
        println!(
            "  {:<40} {:<24} {tools:>3} tools  {}  ({})",
            app.id(),
            app.descriptor.name,
            app.slug,
            app.source.display()
        );
    }
    if !registry.rejected.is_empty() {
        println!("{} file(s) skipped:", registry.rejected.len());
        for rejected in &registry.rejected {
            for line in rejected.to_string().lines() {
                println!("  {line}");
            }
        }
    }
}

/// `validate`: one line per problem, or `ok`.
pub fn validation(path: &str, result: &Result<(), LoadError>) {
    match result {
        Ok(()) => println!("{path}: ok"),
        Err(error) => println!("{error}"),
    }
}

/// `call`: the tool's output.
pub fn call_output(text: &str) {
    println!("{text}");
}
