//! Finding the app and tool a call names, and checking its arguments against the tool's
//! schema before anything else of the gate runs.

use std::sync::Arc;

use aai_descriptor::{AaiError, Descriptor, ErrorKind, ToolCommon, guide};
use serde_json::{Map, Value, json};

use crate::catalog::snapshot::{App, Snapshot};

/// Looks an app up, or says which apps exist.
pub fn find_app<'r>(registry: &'r Snapshot, name: &str) -> Result<&'r Arc<App>, AaiError> {
    registry.find(name).ok_or_else(|| {
        let near = registry.suggestions(name, 8);
        let hint = if registry.apps.is_empty() {
            "No apps are installed: put descriptors in ~/.aai/<appId>/aai.json (or AAI_HOME)."
                .to_owned()
        } else {
            format!("Installed apps include: {}.", near.join(", "))
        };
        AaiError::new(ErrorKind::AppNotFound, format!("No app {name:?}. {hint}"))
            .with_detail(json!({"app": name, "suggestions": near}))
    })
}

/// A tool of `app`, whose whole descriptor (from [`App::descriptor`]) is `descriptor`.
pub(super) fn find_tool<'a>(
    app: &App,
    descriptor: &'a Descriptor,
    tool: &str,
) -> Result<&'a ToolCommon, AaiError> {
    let platform = app.platform;
    descriptor.tool(platform, tool).ok_or_else(|| {
        let names: Vec<&str> = descriptor
            .tools(platform)
            .unwrap_or_default()
            .iter()
            .map(|t| t.name.as_str())
            .collect();
        let near = crate::catalog::snapshot::nearest(tool, names.iter().copied(), 1);
        let hint = near
            .first()
            .map(|n| format!(" Did you mean {n:?}?"))
            .unwrap_or_default();
        AaiError::new(
            ErrorKind::ToolNotFound,
            format!(
                "{} has no tool {tool:?}.{hint} Its tools: {}. Call {} for the guide.",
                app.id(),
                names.join(", "),
                app.slug
            ),
        )
        .with_detail(json!({"app": app.id(), "tool": tool, "tools": names}))
    })
}

/// Checks `args` against the tool's `parameters`; INVALID_PARAMS names each failing field.
pub(super) fn check_args(
    app: &App,
    tool: &ToolCommon,
    schema: Option<&Value>,
    args: &Value,
) -> Result<Map<String, Value>, AaiError> {
    let args = match args {
        Value::Null => Map::new(),
        Value::Object(map) => map.clone(),
        other => {
            return Err(AaiError::new(
                ErrorKind::InvalidParams,
                format!(
                    "args of {}.{} must be an object of named arguments, got {}",
                    app.id(),
                    tool.name,
                    kind_of(other)
                ),
            )
            .with_detail(json!({"field": "args"})));
        }
    };
    let validator = app
        .validator(&tool.name, tool.parameters.as_ref())
        .map_err(|error| {
            AaiError::new(
                ErrorKind::AaiJsonInvalid,
                format!(
                    "the `parameters` schema of {}.{} does not compile: {error}; fix it in {}",
                    app.id(),
                    tool.name,
                    app.source().display()
                ),
            )
        })?;
    // Arguments the schema does not name are a mistake to report, not to drop, unless the
    // schema says it takes more (`additionalProperties`, `patternProperties`).
    if let Some(schema) = schema
        && let Some(properties) = schema.get("properties").and_then(Value::as_object)
        && schema.get("additionalProperties").is_none()
        && schema.get("patternProperties").is_none()
    {
        let unknown: Vec<&String> = args
            .keys()
            .filter(|k| !properties.contains_key(*k))
            .collect();
        if !unknown.is_empty() {
            let names: Vec<&str> = properties.keys().map(String::as_str).collect();
            let listed: Vec<String> = unknown
                .iter()
                .map(|u| {
                    match crate::catalog::snapshot::nearest(u, names.iter().copied(), 1).first() {
                        Some(near) if strsim::jaro_winkler(u, near) >= 0.8 => {
                            format!("`{u}` (did you mean `{near}`?)")
                        }
                        _ => format!("`{u}`"),
                    }
                })
                .collect();
            return Err(AaiError::new(
                ErrorKind::InvalidParams,
                format!(
                    "{}.{} takes no argument {}; its arguments are {}. Call {} for its parameters.",
                    app.id(),
                    tool.name,
                    listed.join(", "),
                    if names.is_empty() {
                        "none".to_owned()
                    } else {
                        names.join(", ")
                    },
                    app.slug
                ),
            )
            .with_detail(
                json!({"field": unknown[0], "unknown": unknown, "reason": "unknown_argument"}),
            ));
        }
    }
    let Some(validator) = validator else {
        return Ok(args);
    };
    let instance = Value::Object(args);
    let errors: Vec<(String, String)> = validator
        .iter_errors(&instance)
        .take(10)
        .map(|error| {
            let mut field = error
                .instance_path()
                .as_str()
                .trim_start_matches('/')
                .replace('/', ".");
            if let jsonschema::error::ValidationErrorKind::Required { property } = error.kind() {
                let name = property
                    .as_str()
                    .map_or_else(|| property.to_string(), str::to_owned);
                field = if field.is_empty() {
                    name
                } else {
                    format!("{field}.{name}")
                };
            }
            // A failing value is quoted in the message; keep a 10 MB string out of it.
            (field, guide::shorten(&error.to_string(), 300))
        })
        .collect();
    let Value::Object(args) = instance else {
        return Ok(Map::new());
    };
    if errors.is_empty() {
        return Ok(args);
    }
    let listed: Vec<String> = errors.iter().map(|(f, m)| format!("`{f}`: {m}")).collect();
    Err(AaiError::new(
        ErrorKind::InvalidParams,
        format!(
            "Invalid arguments for {}.{}: {}. Call {} for its parameters.",
            app.id(),
            tool.name,
            listed.join("; "),
            app.slug
        ),
    )
    .with_detail(json!({
        "field": errors[0].0,
        "errors": errors.iter().map(|(f, m)| json!({"field": f, "message": m})).collect::<Vec<_>>(),
    })))
}

fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}
