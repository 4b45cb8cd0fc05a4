//! Parsing and validating descriptors: JSON syntax, the published schema, then the checks a
//! schema cannot express. Every problem carries a JSON pointer.

use std::collections::HashSet;
use std::sync::{Arc, LazyLock, Mutex, PoisonError, Weak};

use serde::Deserialize;
use serde_json::{Map, Value};

use crate::error::{LoadError, Problem};
use crate::model::{ComStep, Descriptor, Parameters, Platform};
use crate::script::{self, Language};
use crate::template::{escape_pointer, placeholders_in_value};
use crate::url::UrlTemplate;

/// The published JSON Schema of `aai.json` (`schemas/aai.schema.json`).
pub const SCHEMA_JSON: &str = include_str!("../../../schemas/aai.schema.json");

/// At most this many problems are reported for one file; the rest are summarised.
const MAX_PROBLEMS: usize = 20;

/// The compiled published schema: compiled when a file is checked against it and dropped when
/// nothing uses it any more (it weighs ~1.3 MB with its patterns' matchers), unless a
/// [`KeepSchema`] is alive, as during a discovery scan that may parse thousands of files.
static SCHEMA: Mutex<Weak<Compiled>> = Mutex::new(Weak::new());
/// The compiled schema while a [`KeepSchema`] is alive.
static KEPT: Mutex<Option<Arc<Compiled>>> = Mutex::new(None);
/// Live [`KeepSchema`] guards.
static KEEPERS: Mutex<usize> = Mutex::new(0);

type Compiled = Result<jsonschema::Validator, BuiltInSchema>;

/// Why the published schema built into the crate did not compile (a build defect).
#[derive(Debug, thiserror::Error)]
enum BuiltInSchema {
    #[error("{0}")]
    Json(#[from] serde_json::Error),
    #[error("{0}")]
    Compile(#[from] jsonschema::ValidationError<'static>),
}

fn compiled_schema() -> Arc<Compiled> {
    let mut slot = SCHEMA.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(schema) = slot.upgrade() {
        return schema;
    }
    let schema = Arc::new((|| {
        let schema: Value = serde_json::from_str(SCHEMA_JSON)?;
        Ok(jsonschema::draft7::new(&schema)?)
    })());
    *slot = Arc::downgrade(&schema);
    drop(slot);
    if *KEEPERS.lock().unwrap_or_else(PoisonError::into_inner) > 0 {
        *KEPT.lock().unwrap_or_else(PoisonError::into_inner) = Some(schema.clone());
    }
    schema
}

/// While alive, the compiled schema stays in memory once a parse has compiled it (a scan
/// that parses many files compiles it once; one that parses none compiles nothing).
#[must_use = "the schema is kept only while the guard is alive"]
pub struct KeepSchema(());

impl KeepSchema {
    pub fn new() -> Self {
        *KEEPERS.lock().unwrap_or_else(PoisonError::into_inner) += 1;
        Self(())
    }
}

impl Default for KeepSchema {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for KeepSchema {
    fn drop(&mut self) {
        let mut keepers = KEEPERS.lock().unwrap_or_else(PoisonError::into_inner);
        *keepers = keepers.saturating_sub(1);
        if *keepers == 0 {
            KEPT.lock().unwrap_or_else(PoisonError::into_inner).take();
        }
    }
}

/// Parses and validates one descriptor. `source_name` names the file (or URL) in messages.
///
/// # Errors
/// A [`LoadError`] listing every problem found, each with its JSON pointer.
pub fn parse(source_name: &str, bytes: &[u8]) -> Result<Descriptor, LoadError> {
    parse_checked(source_name, bytes, true)
}

/// [`parse`] for bytes this gateway version has validated before, unchanged since (a file
/// whose size, modification time and inode match those recorded when it passed): the checks
/// against schemas are skipped (the published schema, and the JSON Schema meta-schema for each
/// tool's `parameters`), so reading an app's guide or running its tool compiles neither; the
/// typed reading and every other check still run.
///
/// # Errors
/// As [`parse`], without the schema's problems.
pub fn parse_known(source_name: &str, bytes: &[u8]) -> Result<Descriptor, LoadError> {
    parse_checked(source_name, bytes, false)
}

fn parse_checked(source_name: &str, bytes: &[u8], schema: bool) -> Result<Descriptor, LoadError> {
    let fail = |problems: Vec<Problem>| LoadError {
        source_name: source_name.to_owned(),
        problems,
    };
    let mut doc: Value = serde_json::from_slice(bytes).map_err(|e| {
        fail(vec![Problem::new(
            "",
            format!(
                "not valid JSON at line {} column {}: {e}",
                e.line(),
                e.column()
            ),
        )])
    })?;
    let mut problems = normalize_aliases(&mut doc);
    if schema {
        problems.extend(schema_problems(&doc));
    }
    if !problems.is_empty() {
        return Err(fail(cap(problems)));
    }
    let descriptor =
        Descriptor::deserialize(&doc).map_err(|e| fail(vec![Problem::new("", e.to_string())]))?;
    let problems = semantic_problems(&descriptor, &doc, schema);
    if problems.is_empty() {
        Ok(descriptor)
    } else {
        Err(fail(cap(problems)))
    }
}

fn cap(mut problems: Vec<Problem>) -> Vec<Problem> {
    if problems.len() > MAX_PROBLEMS {
        let more = problems.len() - MAX_PROBLEMS;
        problems.truncate(MAX_PROBLEMS);
        problems.push(Problem::new("", format!("… and {more} more problems")));
    }
    problems
}

/// Renames the older `skills` key to `tools` in every platform section.
fn normalize_aliases(doc: &mut Value) -> Vec<Problem> {
    let mut problems = Vec::new();
    let Some(platforms) = doc.get_mut("platforms").and_then(Value::as_object_mut) else {
        return problems;
    };
    for (key, section) in platforms.iter_mut() {
        let Some(section) = section.as_object_mut() else {
            continue;
        };
        if let Some(skills) = section.remove("skills") {
            if section.contains_key("tools") {
                problems.push(Problem::new(
                    format!("/platforms/{}/skills", escape_pointer(key)),
                    "both `tools` and its older name `skills` are present; keep only `tools`",
                ));
            } else {
                section.insert("tools".to_owned(), skills);
            }
        }
    }
    problems
}

fn schema_problems(doc: &Value) -> Vec<Problem> {
    let schema = compiled_schema();
    let validator = match &*schema {
        Ok(validator) => validator,
        Err(error) => {
            return vec![Problem::new(
                "",
                format!("the built-in schema does not compile: {error}"),
            )];
        }
    };
    validator
        .iter_errors(doc)
        .map(|error| {
            let mut message = error.to_string();
            if let jsonschema::error::ValidationErrorKind::AdditionalProperties { unexpected } =
                error.kind()
            {
                let hints: Vec<String> = unexpected
                    .iter()
                    .filter_map(|name| {
                        did_you_mean(name).map(|near| format!("`{name}`: did you mean `{near}`?"))
                    })
                    .collect();
                if !hints.is_empty() {
                    message = format!("{message} ({})", hints.join("; "));
                }
            }
            Problem::new(error.instance_path().to_string(), message)
        })
        .collect()
}

/// Every property name the published schema knows, for "did you mean".
static KNOWN_FIELDS: LazyLock<Vec<String>> = LazyLock::new(|| {
    fn walk(value: &Value, out: &mut HashSet<String>) {
        match value {
            Value::Object(map) => {
                if let Some(Value::Object(properties)) = map.get("properties") {
                    out.extend(properties.keys().cloned());
                }
                map.values().for_each(|v| walk(v, out));
            }
            Value::Array(items) => items.iter().for_each(|v| walk(v, out)),
            _ => {}
        }
    }
    let mut names = HashSet::new();
    if let Ok(schema) = serde_json::from_str::<Value>(SCHEMA_JSON) {
        walk(&schema, &mut names);
    }
    let mut names: Vec<String> = names.into_iter().collect();
    names.sort();
    names
});

/// The known field nearest to an unknown one, when it is close enough to be a typo.
fn did_you_mean(name: &str) -> Option<&'static str> {
    KNOWN_FIELDS
        .iter()
        .map(|known| (strsim::jaro_winkler(name, known), known))
        .filter(|(score, _)| *score >= 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, known)| known.as_str())
}

/// Whether `app_id` is a reverse-DNS style id: dot-separated labels of letters, digits, `_`
/// and `-`, at least two labels, the first starting with a letter.
pub fn is_valid_app_id(app_id: &str) -> bool {
    let mut labels = app_id.split('.');
    let first_ok = labels
        .next()
        .and_then(|l| l.chars().next())
        .is_some_and(|c| c.is_ascii_alphabetic());
    first_ok
        && app_id.len() <= 255
        && app_id.contains('.')
        && app_id.split('.').all(|label| {
            !label.is_empty()
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        })
}

/// The checks a schema cannot express. `schemas`: also check each tool's `parameters` against
/// the JSON Schema meta-schema and compile those that can fail to compile.
fn semantic_problems(descriptor: &Descriptor, doc: &Value, schemas: bool) -> Vec<Problem> {
    let mut problems = Vec::new();
    if !is_valid_app_id(&descriptor.app_id) {
        problems.push(Problem::new(
            "/appId",
            format!(
                "{:?} is not a valid appId: use reverse-DNS labels of letters, digits, `_` and `-` separated by dots, e.g. \"com.example.mail\"",
                descriptor.app_id
            ),
        ));
    }
    for platform in Platform::ALL {
        let Some(section) = doc.pointer(&format!("/platforms/{}", platform.key())) else {
            continue;
        };
        let base = format!("/platforms/{}", platform.key());
        let tools = section
            .get("tools")
            .and_then(Value::as_array)
            .map(Vec::as_slice);
        match tools {
            // A server lists its own tools.
            None if platform == Platform::Mcp => {}
            None => problems.push(Problem::new(
                base.clone(),
                "the section has no `tools` list",
            )),
            Some(tools) => check_tools(&base, tools, schemas, &mut problems),
        }
    }
    // Scripts are planned only once every placeholder names a parameter.
    if problems.is_empty() {
        script_problems(descriptor, &mut problems);
        dbus_problems(descriptor, &mut problems);
        ui_problems(descriptor, &mut problems);
        web_problems(descriptor, &mut problems);
        mcp_problems(descriptor, &mut problems);
        if schemas {
            schema_compile_problems(descriptor, &mut problems);
        }
    }
    problems
}

/// Accessibility tools (`atspi` on Linux, `uia` on Windows, `ax` on macOS): the section names
/// its app, every tool is a list of steps and names no D-Bus method or script, every step's
/// path reads, a `set_text` has its text and a `set_value` its value.
fn ui_problems(descriptor: &Descriptor, problems: &mut Vec<Problem>) {
    let platforms = &descriptor.platforms;
    if let Some(section) = platforms.linux.as_ref().filter(|s| s.automation == "atspi") {
        // The app defaults to the descriptor's name on Linux, as it always has.
        for (index, tool) in section.tools.iter().enumerate() {
            let steps = tool.fields.steps.as_deref();
            let other =
                (!tool.fields.method.is_empty()).then_some("a `method` is for dbus sections");
            tool_steps_problems("linux", "atspi", index, steps, other, problems);
        }
    }
    if let Some(section) = platforms.windows.as_ref().filter(|s| s.automation == "uia") {
        app_problem(
            "windows",
            "uia",
            section.fields.app.as_deref(),
            "its process name (`notepad`) or a window title",
            problems,
        );
        for (index, tool) in section.tools.iter().enumerate() {
            let steps = tool.fields.steps.as_deref();
            let other =
                (!tool.fields.script.is_empty()).then_some("a `script` is for com sections");
            tool_steps_problems("windows", "uia", index, steps, other, problems);
        }
    }
    if let Some(section) = platforms.macos.as_ref().filter(|s| s.automation == "ax") {
        app_problem(
            "macos",
            "ax",
            section.fields.app.as_deref(),
            "its name as System Events lists its process (`TextEdit`) or its bundle id",
            problems,
        );
        for (index, tool) in section.tools.iter().enumerate() {
            let steps = tool.fields.steps.as_deref();
            let other = (!tool.fields.script.is_empty())
                .then_some("a `script` is for applescript and jxa sections");
            tool_steps_problems("macos", "ax", index, steps, other, problems);
        }
    }
}

/// A `uia` or `ax` section without the app it drives.
fn app_problem(
    platform: &str,
    kind: &str,
    app: Option<&str>,
    what: &str,
    problems: &mut Vec<Problem>,
) {
    if app.is_none_or(|app| app.trim().is_empty()) {
        problems.push(Problem::new(
            format!("/platforms/{platform}/app"),
            format!("{} {kind} section names its `app`: {what}", article(kind)),
        ));
    }
}

/// `a uia`, but `an ax`, `an atspi`.
fn article(kind: &str) -> &'static str {
    if kind.starts_with('u') { "a" } else { "an" }
}

/// One accessibility tool's steps.
fn tool_steps_problems(
    platform: &str,
    kind: &str,
    index: usize,
    steps: Option<&[crate::ui::UiStep]>,
    other: Option<&str>,
    problems: &mut Vec<Problem>,
) {
    use crate::ui::{UiAction, UiPath};
    let base = format!("/platforms/{platform}/tools/{index}");
    let Some(steps) = steps.filter(|steps| !steps.is_empty() && other.is_none()) else {
        let why = other.map(|o| format!(" ({o})")).unwrap_or_default();
        problems.push(Problem::new(
            base,
            format!(
                "{} {kind} tool is a non-empty list of `steps`{why}",
                article(kind)
            ),
        ));
        return;
    };
    for (at, step) in steps.iter().enumerate() {
        let pointer = format!("{base}/steps/{at}");
        if let Err(problem) = UiPath::parse(&step.path) {
            problems.push(Problem::new(format!("{pointer}/path"), problem));
        }
        let needs = match step.action {
            UiAction::SetText if step.text.is_none() => Some("text"),
            UiAction::SetValue | UiAction::Check if step.value.is_none() => Some("value"),
            _ => None,
        };
        if let Some(field) = needs {
            problems.push(Problem::new(
                pointer,
                format!("a `{}` step needs `{field}`", step.action.key()),
            ));
        }
    }
}

/// The parameter schemas compile (a pattern that is not a regular expression only shows up
/// when a validator is built, which the gateway otherwise does at the first call).
fn schema_compile_problems(descriptor: &Descriptor, problems: &mut Vec<Problem>) {
    for platform in Platform::ALL {
        for (index, tool) in descriptor
            .tools(platform)
            .unwrap_or_default()
            .iter()
            .enumerate()
        {
            // Meta-validation already passed; what can still fail to compile is a regular
            // expression or a reference, so only schemas with those are built (building every
            // schema would cost cold start a lot at thousands of apps).
            let Some(parameters) = &tool.parameters else {
                continue;
            };
            let schema = parameters.schema();
            if !mentions_any(
                &schema,
                &["pattern", "patternProperties", "$ref", "$dynamicRef"],
            ) {
                continue;
            }
            if let Err(error) = jsonschema::validator_for(&schema) {
                problems.push(Problem::new(
                    format!("/platforms/{}/tools/{index}/parameters", platform.key()),
                    format!("the schema does not compile: {error}"),
                ));
            }
        }
    }
}

/// Whether any object in `value` has one of `keys`.
fn mentions_any(value: &Value, keys: &[&str]) -> bool {
    match value {
        Value::Object(map) => {
            keys.iter().any(|k| map.contains_key(*k)) || map.values().any(|v| mentions_any(v, keys))
        }
        Value::Array(items) => items.iter().any(|v| mentions_any(v, keys)),
        _ => false,
    }
}

/// The JSON type a parameter's schema declares, when it names one.
fn declared_type<'a>(parameters: Option<&'a Value>, name: &str) -> Option<Vec<&'a str>> {
    let kind = parameters?.get("properties")?.get(name)?.get("type")?;
    match kind {
        Value::String(one) => Some(vec![one.as_str()]),
        Value::Array(many) => Some(many.iter().filter_map(Value::as_str).collect()),
        _ => None,
    }
}

/// D-Bus tools: `signature` is a D-Bus signature; with `args`, one argument per complete
/// type, and each fixed value or parameter type fits its D-Bus type.
fn dbus_problems(descriptor: &Descriptor, problems: &mut Vec<Problem>) {
    let Some(section) = descriptor
        .platforms
        .linux
        .as_ref()
        .filter(|s| s.automation == "dbus")
    else {
        return;
    };
    for (index, tool) in section.tools.iter().enumerate() {
        let base = format!("/platforms/linux/tools/{index}");
        if tool.fields.method.is_empty() || tool.fields.steps.is_some() {
            problems.push(Problem::new(
                base.clone(),
                "a dbus tool names its `method` (`steps` are for atspi sections)",
            ));
            continue;
        }
        let Some(text) = tool.fields.signature.as_deref() else {
            continue;
        };
        let types = match crate::dbus_sig::split(text) {
            Ok(types) => types,
            Err(error) => {
                problems.push(Problem::new(
                    format!("{base}/signature"),
                    format!("{text:?} is not a D-Bus signature: {error}"),
                ));
                continue;
            }
        };
        let Some(args) = tool.fields.args.as_deref() else {
            continue;
        };
        if args.len() != types.len() {
            problems.push(Problem::new(
                format!("{base}/args"),
                format!(
                    "`signature` {text:?} has {} argument(s) but `args` gives {}; they must match one to one",
                    types.len(),
                    args.len()
                ),
            ));
            continue;
        }
        let schema = tool.common.parameters.as_ref().map(Parameters::schema);
        for (at, (arg, ty)) in args.iter().zip(&types).enumerate() {
            let fits = crate::dbus_sig::json_types(ty);
            let given: Vec<&str> = match arg {
                Value::String(text) => match crate::template::whole_placeholder(text) {
                    Some(name) => match declared_type(schema.as_ref(), name) {
                        Some(types) => types,
                        None => continue,
                    },
                    None => vec!["string"],
                },
                other => vec![crate::dbus_sig::json_type(other)],
            };
            if let Some(wrong) = given.iter().find(|g| **g != "null" && !fits.contains(g)) {
                problems.push(Problem::new(
                    format!("{base}/args/{at}"),
                    format!(
                        "in-arg {at} has D-Bus type `{ty}`, which takes {} — not {wrong}",
                        fits.join(" or ")
                    ),
                ));
            }
        }
    }
}

/// `scheme://host:port` of a URL.
fn origin(url: &str) -> Option<String> {
    let parsed = url::Url::parse(url).ok()?;
    Some(format!(
        "{}://{}:{}",
        parsed.scheme(),
        parsed.host_str()?,
        parsed.port_or_known_default()?
    ))
}

/// An MCP server: `stdio` names a command and no URL, `http` an https (or loopback http) URL
/// and no command.
fn mcp_problems(descriptor: &Descriptor, problems: &mut Vec<Problem>) {
    let Some(section) = &descriptor.platforms.mcp else {
        return;
    };
    let fields = &section.fields;
    match section.automation.as_str() {
        "stdio" => {
            if fields
                .command
                .as_deref()
                .is_none_or(|c| c.trim().is_empty())
            {
                problems.push(Problem::new(
                    "/platforms/mcp",
                    "a stdio server needs `command` (the program that runs it, e.g. \"npx\")",
                ));
            }
            if fields.url.is_some() || fields.auth.is_some() {
                problems.push(Problem::new(
                    "/platforms/mcp/url",
                    "`url` and `auth` are for `automation: \"http\"`; a stdio server is started with `command`",
                ));
            }
            // One source per variable: a value in the file and one in the store would leave
            // the reader guessing which the server gets.
            for (i, name) in fields.env_from_store.iter().enumerate() {
                if fields.env.contains_key(name) {
                    problems.push(Problem::new(
                        format!("/platforms/mcp/env_from_store/{i}"),
                        format!("{name} is also in `env`: a variable comes from `env` or from the credential store, not both"),
                    ));
                }
            }
        }
        "http" => {
            let url = fields.url.as_deref().unwrap_or_default();
            let parsed = url::Url::parse(url).ok();
            let loopback = parsed.as_ref().is_some_and(|u| {
                matches!(
                    u.host_str(),
                    Some("127.0.0.1" | "localhost" | "[::1]" | "::1")
                )
            });
            match parsed.as_ref().map(url::Url::scheme) {
                Some("https") => {}
                Some("http") if loopback => {}
                _ => problems.push(Problem::new(
                    "/platforms/mcp/url",
                    format!(
                        "{url:?} must be an https URL of the server's MCP endpoint (plain http only on 127.0.0.1/localhost)"
                    ),
                )),
            }
            if let Some(auth) = fields.auth.as_ref().filter(|a| a.kind == "oauth2") {
                // The sign-in's endpoints are named, as a web app's are: the gateway neither
                // guesses them nor registers itself as a client.
                for key in ["auth_url", "token_url", "client_id"] {
                    if auth
                        .fields
                        .get(key)
                        .and_then(Value::as_str)
                        .is_none_or(str::is_empty)
                    {
                        problems.push(Problem::new(
                            format!("/platforms/mcp/auth/{key}"),
                            format!("an `oauth2` sign-in needs `{key}` (the server's authorization endpoint, token endpoint and the client id it gave this gateway)"),
                        ));
                    }
                }
            }
            if fields.command.is_some()
                || !fields.args.is_empty()
                || fields.cwd.is_some()
                || !fields.env_from_store.is_empty()
            {
                problems.push(Problem::new(
                    "/platforms/mcp/command",
                    "`command`, `args`, `cwd` and `env_from_store` are for `automation: \"stdio\"`; an http server is reached at `url` (its credential is `auth`)",
                ));
            }
        }
        _ => {}
    }
}

/// Web tools: an https (or loopback http) base URL with no placeholder, endpoints that stay
/// on its origin, and HTTP methods.
fn web_problems(descriptor: &Descriptor, problems: &mut Vec<Problem>) {
    let Some(section) = &descriptor.platforms.web else {
        return;
    };
    let base = section.fields.base_url.trim_end_matches('/');
    let Some(base_origin) = origin(base).filter(|_| !base.contains("${")) else {
        problems.push(Problem::new(
            "/platforms/web/base_url",
            format!(
                "{base:?} is not a URL like https://api.example.com (and holds no placeholder)"
            ),
        ));
        return;
    };
    let scheme = base.split(':').next().unwrap_or_default();
    let loopback = url::Url::parse(base).ok().is_some_and(|u| {
        matches!(
            u.host_str(),
            Some("127.0.0.1" | "localhost" | "[::1]" | "::1")
        )
    });
    if scheme != "https" && !(scheme == "http" && loopback) {
        problems.push(Problem::new(
            "/platforms/web/base_url",
            format!("{base:?} must use https (plain http is only for 127.0.0.1/localhost)"),
        ));
    }
    for (index, tool) in section.tools.iter().enumerate() {
        let at = format!("/platforms/web/tools/{index}");
        let endpoint = &tool.fields.endpoint;
        let endpoint = if endpoint.starts_with('/') {
            endpoint.clone()
        } else {
            format!("/{endpoint}")
        };
        match UrlTemplate::parse(&format!("{base}{endpoint}"), scheme) {
            Err(message) => {
                problems.push(Problem::new(format!("{at}/endpoint"), message.to_string()));
            }
            Ok(template) => {
                let sample = template.fill(&|_| Some(Value::String("x".into())));
                if sample.ok().and_then(|url| origin(&url)) != Some(base_origin.clone()) {
                    problems.push(Problem::new(
                        format!("{at}/endpoint"),
                        format!("{:?} leads away from base_url's origin; a tool's requests must stay on {base_origin}", tool.fields.endpoint),
                    ));
                }
            }
        }
        if matches!(tool.fields.body_type.as_deref(), Some("form" | "multipart"))
            && tool.fields.body.as_ref().is_some_and(|b| !b.is_object())
        {
            problems.push(Problem::new(
                format!("{at}/body"),
                "a form or multipart body must be an object of fields",
            ));
        }
        if let Some(method) = &tool.fields.method
            && (method.is_empty()
                || !method
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)))
        {
            problems.push(Problem::new(
                format!("{at}/method"),
                format!("{method:?} is not an HTTP method (GET, POST, PUT, PATCH, DELETE, …)"),
            ));
        }
    }
}

/// SCRIPT_PARSE_ERROR problems: scripts that cannot be run with values kept as data.
fn script_problems(descriptor: &Descriptor, problems: &mut Vec<Problem>) {
    let platforms = &descriptor.platforms;
    if let Some(section) = &platforms.macos
        && let Some(language) = Language::of_automation(&section.automation)
    {
        for (index, tool) in section.tools.iter().enumerate() {
            let schema = tool.common.parameters.as_ref().map(Parameters::schema);
            let output = script_output(language, tool.fields.output_parser.as_deref());
            if let Err(error) = script::plan(language, &tool.fields.script, output, |name| {
                script::param_kind(schema.as_ref(), name)
            }) {
                problems.push(Problem::script(
                    format!("/platforms/macos/tools/{index}/script"),
                    error.to_string(),
                ));
            }
        }
    }
    if let Some(section) = platforms.windows.as_ref().filter(|s| s.automation == "com") {
        for (index, tool) in section.tools.iter().enumerate() {
            let base = format!("/platforms/windows/tools/{index}/script");
            com_problems(
                &base,
                &tool.fields.script,
                section.fields.progid.is_some(),
                problems,
            );
        }
    }
    if let Some(section) = &platforms.ios {
        for (index, tool) in section.tools.iter().enumerate() {
            if let Err(message) =
                UrlTemplate::parse(&tool.fields.url_template, &section.fields.scheme)
            {
                problems.push(Problem::script(
                    format!("/platforms/ios/tools/{index}/url_template"),
                    message.to_string(),
                ));
            }
        }
    }
}

/// How a macOS tool's result comes back from its script.
pub fn script_output(language: Language, output_parser: Option<&str>) -> script::Output {
    match (language, output_parser) {
        (Language::Jxa, Some("result as record")) => script::Output::Json,
        _ => script::Output::Plain,
    }
}

/// A COM action list must name its objects before use and give each action what it needs.
fn com_problems(base: &str, steps: &[ComStep], section_progid: bool, problems: &mut Vec<Problem>) {
    let mut vars: HashSet<&str> = HashSet::new();
    for (index, step) in steps.iter().enumerate() {
        let at = format!("{base}/{index}");
        let mut need = |field: &str, present: bool| {
            if !present {
                problems.push(Problem::script(
                    at.clone(),
                    format!("a `{}` step needs `{field}`", step.action),
                ));
            }
        };
        match step.action.as_str() {
            "create" => need("progid", step.progid.is_some() || section_progid),
            "call" => {
                need("object", step.object.is_some());
                need("method", step.method.is_some());
            }
            "get" => {
                need("object", step.object.is_some());
                need("property", step.property.is_some());
            }
            "set" => {
                need("object", step.object.is_some());
                need("property", step.property.is_some());
                need("value", step.value.is_some());
            }
            _ => {}
        }
        if let Some(object) = step.object.as_deref()
            && !vars.contains(object)
        {
            problems.push(Problem::script(
                format!("{at}/object"),
                format!("`{object}` is not a `var` of an earlier step"),
            ));
        }
        if let Some(var) = step.var.as_deref() {
            vars.insert(var);
        }
    }
}

fn check_tools(base: &str, tools: &[Value], schemas: bool, problems: &mut Vec<Problem>) {
    let mut seen = HashSet::new();
    for (index, tool) in tools.iter().enumerate() {
        let pointer = format!("{base}/tools/{index}");
        let Some(tool) = tool.as_object() else {
            continue;
        };
        let name = tool.get("name").and_then(Value::as_str).unwrap_or_default();
        if !seen.insert(name) {
            problems.push(Problem::new(
                format!("{pointer}/name"),
                format!("duplicate tool name {name:?} in this section"),
            ));
        }
        let declared = match tool.get("parameters") {
            Some(parameters) => check_parameters(
                &format!("{pointer}/parameters"),
                parameters,
                schemas,
                problems,
            ),
            None => HashSet::new(),
        };
        check_placeholders(&pointer, tool, &declared, problems);
    }
}

/// Checks a tool's `parameters` is a valid JSON Schema (when `schemas`) of an object; returns
/// its property names.
fn check_parameters(
    pointer: &str,
    parameters: &Value,
    schemas: bool,
    problems: &mut Vec<Problem>,
) -> HashSet<String> {
    // Meta-validation only: compiling a validator per tool at load time costs memory for every
    // installed app; the gateway compiles on first call and reports a failure there.
    if schemas && let Err(error) = jsonschema::meta::validate(parameters) {
        problems.push(Problem::new(
            format!("{pointer}{}", error.instance_path()),
            format!("not a valid JSON Schema: {error}"),
        ));
    }
    match parameters.get("type") {
        None => {}
        Some(Value::String(kind)) if kind == "object" => {}
        Some(other) => problems.push(Problem::new(
            format!("{pointer}/type"),
            format!("parameters must describe an object (\"type\": \"object\"), found {other}"),
        )),
    }
    parameters
        .get("properties")
        .and_then(Value::as_object)
        .map(|props| props.keys().cloned().collect())
        .unwrap_or_default()
}

fn check_placeholders(
    pointer: &str,
    tool: &Map<String, Value>,
    declared: &HashSet<String>,
    problems: &mut Vec<Problem>,
) {
    let mut found = Vec::new();
    for (key, value) in tool {
        if matches!(key.as_str(), "name" | "description" | "parameters") {
            continue;
        }
        placeholders_in_value(
            value,
            &format!("{pointer}/{}", escape_pointer(key)),
            &mut found,
        );
    }
    for (at, name) in found {
        if !declared.contains(name) {
            let hint = if declared.is_empty() {
                "the tool declares no parameters".to_owned()
            } else {
                let mut names: Vec<&str> = declared.iter().map(String::as_str).collect();
                names.sort_unstable();
                format!("declared: {}", names.join(", "))
            };
            problems.push(Problem::new(
                at,
                format!("placeholder ${{{name}}} does not name a parameter of this tool ({hint})"),
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn linux_doc(tool: Value) -> Value {
        json!({
            "schema_version": "1.0",
            "appId": "org.example.app",
            "name": "Example",
            "description": "An example",
            "platforms": {"linux": {
                "automation": "dbus", "service": "org.example.App",
                "object": "/org/example/App", "interface": "org.example.App",
                "tools": [tool]
            }}
        })
    }

    fn problems(doc: &Value) -> Vec<Problem> {
        parse("t/aai.json", doc.to_string().as_bytes())
            .expect_err("should be rejected")
            .problems
    }

    #[test]
    fn the_builtin_schema_compiles() {
        let schema = compiled_schema();
        assert!(schema.is_ok(), "{:?}", schema.as_ref().as_ref().err());
    }

    #[test]
    fn the_compiled_schema_stays_only_while_a_keeper_lives() {
        let doc = linux_doc(json!({"name": "a", "description": "A", "method": "A"}));
        {
            let _keep = KeepSchema::new();
            parse("t", doc.to_string().as_bytes()).expect("valid");
            // Kept after the parse that compiled it returned.
            assert!(KEPT.lock().expect("lock").is_some());
            assert!(SCHEMA.lock().expect("lock").upgrade().is_some());
        }
        assert!(KEPT.lock().expect("lock").is_none());
    }

    #[test]
    fn a_known_file_reads_the_same_without_the_schema_checks() {
        let doc = linux_doc(
            json!({"name": "echo", "description": "Echo", "method": "Echo",
            "parameters": {"type": "object", "properties": {"text": {"type": "string"}}},
            "args": ["${text}"]}),
        );
        let bytes = doc.to_string();
        let full = parse("t", bytes.as_bytes()).expect("valid");
        let known = parse_known("t", bytes.as_bytes()).expect("valid");
        assert_eq!(format!("{full:?}"), format!("{known:?}"));
        // What only a schema says is not looked at again ...
        let mut extra = doc.clone();
        extra["platforms"]["linux"]["tools"][0]["name"] = json!("echo!");
        assert!(parse("t", extra.to_string().as_bytes()).is_err());
        assert!(parse_known("t", extra.to_string().as_bytes()).is_ok());
        // ... but every other check runs: a placeholder no parameter declares, bad JSON.
        let undeclared = linux_doc(
            json!({"name": "echo", "description": "Echo", "method": "Echo", "args": ["${text}"]}),
        );
        let error = parse_known("t", undeclared.to_string().as_bytes()).expect_err("undeclared");
        assert!(error.to_string().contains("text"), "{error}");
        assert!(parse_known("t", b"{").is_err());
    }

    #[test]
    fn accepts_a_valid_descriptor() {
        let doc = linux_doc(
            json!({"name": "echo", "description": "Echo", "method": "Echo",
            "parameters": {"type": "object", "properties": {"text": {"type": "string"}}},
            "args": ["${text}"]}),
        );
        let descriptor = parse("t", doc.to_string().as_bytes()).expect("valid");
        assert_eq!(descriptor.tools(Platform::Linux).map(|t| t.len()), Some(1));
    }

    #[test]
    fn skills_is_an_alias_of_tools() {
        let mut doc = linux_doc(json!({"name": "a", "description": "A", "method": "A"}));
        let section = doc
            .pointer_mut("/platforms/linux")
            .and_then(Value::as_object_mut)
            .expect("section");
        let tools = section.remove("tools").expect("tools");
        section.insert("skills".into(), tools);
        let descriptor = parse("t", doc.to_string().as_bytes()).expect("valid");
        assert_eq!(
            descriptor
                .tool(Platform::Linux, "a")
                .map(|t| t.name.as_str()),
            Some("a")
        );
    }

    #[test]
    fn syntax_errors_say_where() {
        let error = parse("bad/aai.json", b"{\"appId\": ").expect_err("invalid");
        let text = error.to_string();
        assert!(
            text.starts_with("bad/aai.json: (document): not valid JSON at line 1"),
            "{text}"
        );
    }

    #[test]
    fn schema_errors_carry_pointers() {
        let doc = linux_doc(json!({"name": "a", "description": "A"}));
        let found = problems(&doc);
        assert_eq!(found[0].pointer, "/platforms/linux/tools/0");
        assert!(found[0].message.contains("method"), "{found:?}");
    }

    #[test]
    fn rejects_bad_app_ids() {
        let mut doc = linux_doc(json!({"name": "a", "description": "A", "method": "A"}));
        doc["appId"] = json!("no dots here");
        let found = problems(&doc);
        assert_eq!(found[0].pointer, "/appId");
        for good in ["com.apple.mail", "org.mpris.MediaPlayer2.vlc", "a.b-c_d"] {
            assert!(is_valid_app_id(good), "{good}");
        }
        for bad in ["mail", ".com.x", "com..x", "1com.x", "com.x/y", "com.x:y"] {
            assert!(!is_valid_app_id(bad), "{bad}");
        }
    }

    #[test]
    fn rejects_duplicate_tool_names() {
        let mut doc = linux_doc(json!({"name": "a", "description": "A", "method": "A"}));
        doc["platforms"]["linux"]["tools"]
            .as_array_mut()
            .expect("tools")
            .push(json!({"name": "a", "description": "again", "method": "B"}));
        let found = problems(&doc);
        assert_eq!(found[0].pointer, "/platforms/linux/tools/1/name");
        assert!(found[0].message.contains("duplicate"));
    }

    #[test]
    fn rejects_undeclared_placeholders() {
        let doc = linux_doc(json!({"name": "a", "description": "A", "method": "A",
            "parameters": {"type": "object", "properties": {"x": {"type": "string"}}},
            "args": ["${x}", "${y}"]}));
        let found = problems(&doc);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].pointer, "/platforms/linux/tools/0/args/1");
        assert!(found[0].message.contains("${y}") && found[0].message.contains("declared: x"));
    }

    #[test]
    fn rejects_invalid_parameter_schemas() {
        let doc = linux_doc(json!({"name": "a", "description": "A", "method": "A",
            "parameters": {"type": "object", "properties": {"x": {"type": "strin"}}}}));
        let found = problems(&doc);
        assert!(
            found[0]
                .pointer
                .starts_with("/platforms/linux/tools/0/parameters"),
            "{found:?}"
        );
        assert!(found[0].message.contains("not a valid JSON Schema"));
        let doc = linux_doc(json!({"name": "a", "description": "A", "method": "A",
            "parameters": {"type": "array"}}));
        assert_eq!(
            problems(&doc)[0].pointer,
            "/platforms/linux/tools/0/parameters/type"
        );
    }

    #[test]
    fn parses_every_platform_of_the_spec_example() {
        let doc = include_str!("../tests/fixtures/spec-mail.json");
        let descriptor = parse("spec", doc.as_bytes()).expect("the spec's example is valid");
        for platform in [
            Platform::Macos,
            Platform::Windows,
            Platform::Linux,
            Platform::Android,
            Platform::Ios,
        ] {
            let tools = descriptor.tools(platform).expect("section");
            assert_eq!(tools[0].name, "send_email", "{platform:?}");
        }
        let linux = descriptor.platforms.linux.as_ref().expect("linux");
        assert_eq!(linux.fields.service, "org.example.Mail");
        let windows = descriptor.platforms.windows.as_ref().expect("windows");
        assert_eq!(windows.tools[0].fields.script.len(), 7);
    }

    fn with_section(key: &str, section: Value) -> Value {
        json!({
            "schema_version": "1.0", "appId": "org.example.app", "name": "Example",
            "platforms": {key: section}
        })
    }

    #[test]
    fn unsafe_scripts_are_script_parse_errors_naming_the_placeholder() {
        let doc = with_section(
            "macos",
            json!({"automation": "applescript", "tools": [{
                "name": "run", "description": "Run",
                "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}, "n": {"type": "integer"}}},
                "script": "repeat ${n} times\ndo shell script ${cmd}\nend repeat"
            }]}),
        );
        let problems = problems(&doc);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!(problems[0].kind, crate::ErrorKind::ScriptParseError);
        assert_eq!(problems[0].pointer, "/platforms/macos/tools/0/script");
        assert!(
            problems[0]
                .to_string()
                .contains("SCRIPT_PARSE_ERROR: ${cmd}: a text parameter"),
            "{}",
            problems[0]
        );
    }

    #[test]
    fn com_lists_must_define_objects_before_use() {
        let doc = with_section(
            "windows",
            json!({"automation": "com", "tools": [{
                "name": "send", "description": "Send",
                "script": [
                    {"action": "create", "var": "app"},
                    {"action": "call", "object": "mail", "method": "Send"},
                    {"action": "set", "object": "app", "property": "Visible"}
                ]
            }]}),
        );
        let messages: Vec<String> = problems(&doc).iter().map(ToString::to_string).collect();
        assert_eq!(
            messages,
            [
                "/platforms/windows/tools/0/script/0: SCRIPT_PARSE_ERROR: a `create` step needs `progid`",
                "/platforms/windows/tools/0/script/1/object: SCRIPT_PARSE_ERROR: `mail` is not a `var` of an earlier step",
                "/platforms/windows/tools/0/script/2: SCRIPT_PARSE_ERROR: a `set` step needs `value`",
            ]
        );
    }

    #[test]
    fn url_templates_keep_their_host_and_scheme() {
        let doc = with_section(
            "ios",
            json!({"automation": "url_scheme", "scheme": "mailapp", "tools": [{
                "name": "open", "description": "Open",
                "parameters": {"type": "object", "properties": {"h": {"type": "string"}}},
                "url_template": "mailapp://${h}/x"
            }]}),
        );
        let problems = problems(&doc);
        assert_eq!(problems[0].pointer, "/platforms/ios/tools/0/url_template");
        assert!(problems[0].message.contains("host"));
    }
}

#[cfg(test)]
mod mcp_tests {
    fn problems(section: &serde_json::Value) -> Vec<String> {
        let doc = serde_json::json!({"schema_version": "1.0", "appId": "org.example.server",
            "name": "Server", "description": "An MCP server.", "platforms": {"mcp": section}});
        match crate::parse("test", doc.to_string().as_bytes()) {
            Ok(_) => Vec::new(),
            Err(error) => error
                .problems
                .iter()
                .map(|p| format!("{} {}", p.pointer, p.message))
                .collect(),
        }
    }

    #[test]
    fn an_mcp_server_section_is_checked_like_any_other() {
        let ok = [
            serde_json::json!({"automation": "stdio", "command": "npx", "args": ["-y", "server"]}),
            serde_json::json!({"automation": "http", "url": "https://example.com/mcp",
                "auth": {"type": "bearer", "env_var": "TOKEN"}}),
            serde_json::json!({"automation": "http", "url": "http://127.0.0.1:3001/mcp"}),
            serde_json::json!({"automation": "http", "url": "https://e.com/mcp", "auth": {"type": "oauth2",
                "auth_url": "https://e.com/authorize", "token_url": "https://e.com/token", "client_id": "aai", "scopes": ["read"]}}),
            serde_json::json!({"automation": "stdio", "command": "srv", "tools": [{"name": "rm", "risk": "critical"}]}),
            serde_json::json!({"automation": "stdio", "command": "srv", "env": {"DEBUG": "1"},
                "env_from_store": ["GITHUB_PERSONAL_ACCESS_TOKEN"]}),
        ];
        for section in ok {
            assert!(
                problems(&section).is_empty(),
                "{section}: {:?}",
                problems(&section)
            );
        }
        let bad = [
            (
                serde_json::json!({"automation": "stdio"}),
                "needs `command`",
            ),
            (
                serde_json::json!({"automation": "stdio", "command": "x", "url": "https://e.com/mcp"}),
                "for `automation: \"http\"`",
            ),
            (
                serde_json::json!({"automation": "http", "url": "http://example.com/mcp"}),
                "must be an https URL",
            ),
            (
                serde_json::json!({"automation": "http", "url": "https://e.com/mcp", "command": "x"}),
                "for `automation: \"stdio\"`",
            ),
            (
                serde_json::json!({"automation": "http", "url": "https://e.com/mcp", "auth": {"type": "oauth2", "auth_url": "https://e.com/authorize", "client_id": "aai"}}),
                "needs `token_url`",
            ),
            (
                serde_json::json!({"automation": "sse", "url": "https://e.com/mcp"}),
                "/platforms/mcp/automation",
            ),
            (
                serde_json::json!({"automation": "stdio", "command": "x", "tools": [{"name": "a"}, {"name": "a"}]}),
                "duplicate tool name",
            ),
            (
                serde_json::json!({"automation": "stdio", "command": "x", "env": {"TOKEN": "t"}, "env_from_store": ["TOKEN"]}),
                "/platforms/mcp/env_from_store/0 TOKEN is also in `env`",
            ),
            (
                serde_json::json!({"automation": "stdio", "command": "x", "env_from_store": ["NOT A NAME"]}),
                "/platforms/mcp/env_from_store/0",
            ),
            (
                serde_json::json!({"automation": "http", "url": "https://e.com/mcp", "env_from_store": ["TOKEN"]}),
                "`env_from_store` are for `automation: \"stdio\"`",
            ),
        ];
        for (section, expected) in bad {
            let found = problems(&section);
            assert!(
                found.iter().any(|p| p.contains(expected)),
                "{section}: {found:?}"
            );
        }
    }
}
