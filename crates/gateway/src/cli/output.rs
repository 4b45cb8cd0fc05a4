//! Everything the CLI prints on stdout. Server mode never calls into this module: there,
//! stdout carries only MCP frames.
#![allow(clippy::print_stdout)]

/// Every line goes through [`emit`]: a reader that went away (`| head -1`) ends the command
/// quietly with status 0 instead of a panic.
macro_rules! println {
    () => {
        $crate::cli::output::emit(format_args!(""))
    };
    ($($arg:tt)*) => {
        $crate::cli::output::emit(format_args!($($arg)*))
    };
}

/// Writes one line to stdout. A closed pipe ends the process with status 0, as `head` users
/// expect; another write error ends it with status 1 and a message.
///
/// Whatever the line holds — names, descriptions and arguments from clients and descriptors,
/// a tool's output — no control or bidi character reaches the terminal as itself: each is
/// shown as its JSON escape (which keeps printed JSON valid and equal).
pub fn emit(line: std::fmt::Arguments<'_>) {
    use std::io::Write;
    let line = line.to_string();
    let line = aai_descriptor::visible::visible_lines(&line);
    let mut out = std::io::stdout().lock();
    if let Err(error) = writeln!(out, "{line}").and_then(|()| out.flush()) {
        if error.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        eprintln!("aai-gateway: cannot write the output: {error}");
        std::process::exit(1);
    }
}

use aai_descriptor::LoadError;
use aai_descriptor::Platform;
use aai_engine::catalog::snapshot::{Rejected, Snapshot};

/// Generated text (completions, the manual page) written by `write` to stdout; a closed
/// pipe ends quietly.
pub fn generated(write: impl FnOnce(&mut dyn std::io::Write)) {
    use std::io::Write;
    let mut buffer = Vec::new();
    write(&mut buffer);
    let mut out = std::io::stdout().lock();
    if let Err(error) = out.write_all(&buffer).and_then(|()| out.flush())
        && error.kind() != std::io::ErrorKind::BrokenPipe
    {
        eprintln!("aai-gateway: cannot write the output: {error}");
        std::process::exit(1);
    }
}

/// `--scan`: the offered apps, then every file that was skipped and why.
/// An MCP server app's command line (or URL) and how many of its tools are pinned.
fn mcp_server(
    app: &aai_engine::catalog::snapshot::App,
    pins: &std::collections::BTreeMap<String, std::collections::BTreeMap<String, aai_mcpapps::Pin>>,
) -> Option<(String, usize)> {
    let descriptor = app.descriptor().ok()?;
    let section = descriptor.platforms.mcp.as_ref()?;
    let server = match &section.fields.url {
        Some(url) => url.clone(),
        None => std::iter::once(section.fields.command.clone().unwrap_or_default())
            .chain(section.fields.args.iter().cloned())
            .collect::<Vec<_>>()
            .join(" "),
    };
    Some((server, pins.get(app.id()).map_or(0, |p| p.len())))
}

/// An app's tools: its descriptor's, or for an MCP server the tools it listed when it last
/// ran (pinned); `None` for a server that has not run yet.
fn tool_count(
    app: &aai_engine::catalog::snapshot::App,
    server: Option<&(String, usize)>,
) -> Option<usize> {
    match server {
        Some((_, 0)) => None,
        Some((_, pinned)) => Some(*pinned),
        None => Some(
            app.descriptor()
                .ok()
                .and_then(|d| d.tools(app.platform).map(|t| t.len()))
                .unwrap_or(0),
        ),
    }
}

pub fn scan_report(registry: &Snapshot, home: &std::path::Path, platforms: &[Platform]) {
    let pins = aai_mcpapps::Pins::new(home).all().unwrap_or_default();
    if json() {
        let apps: Vec<serde_json::Value> = registry
            .apps
            .iter()
            .map(|app| {
                let server = mcp_server(app, &pins);
                let tools = tool_count(app, server.as_ref());
                let mut row = serde_json::json!({"appId": app.id(), "name": app.name(), "platform": app.platform.key(),
                    "tools": tools, "tool": app.slug, "source": app.source().display().to_string()});
                if let Some((server, pinned)) = server {
                    row["mcp"] = serde_json::json!({"server": server, "state": "starts on first use", "pinned": pinned});
                }
                row
            })
            .collect();
        let rejected: Vec<String> = registry.rejected.iter().map(ToString::to_string).collect();
        value(
            &serde_json::json!({"home": home, "platforms": platforms.iter().map(|p| p.key()).collect::<Vec<_>>(),
            "apps": apps, "rejected": rejected}),
        );
        return;
    }
    println!("AAI home: {}", home.display());
    let served: Vec<&str> = platforms.iter().map(|p| p.key()).collect();
    println!(
        "{} app(s) offered on {}:",
        registry.apps.len(),
        served.join(", ")
    );
    for app in &registry.apps {
        let server = mcp_server(app, &pins);
        let tools = tool_count(app, server.as_ref())
            .map_or_else(|| "  ?".to_owned(), |n| format!("{n:>3}"));
        println!(
            "  {:<40} {:<24} {:<8} {tools} tools  {}  ({})",
            app.id(),
            cell(app.name()),
            app.platform.key(),
            app.slug,
            app.source().display()
        );
        if let Some((server, pinned)) = server {
            println!(
                "  {:<40} MCP server `{}`: starts on first use; {}",
                "",
                cell(&server),
                if pinned == 0 {
                    "its tools are counted once it has run (none pinned yet)".to_owned()
                } else {
                    format!("{pinned} tool(s), as pinned when it last ran")
                }
            );
        }
    }
    let (shadowed, skipped): (Vec<&Rejected>, Vec<&Rejected>) = registry
        .rejected
        .iter()
        .partition(|r| matches!(r, Rejected::Shadowed { .. }));
    if !shadowed.is_empty() {
        println!(
            "{} appId(s) offered by more than one source:",
            shadowed.len()
        );
        for rejected in shadowed {
            if let Rejected::Shadowed {
                path,
                source,
                app_id,
                by,
                by_source,
            } = rejected
            {
                println!(
                    "  {app_id}: the {} descriptor {} won over the {} descriptor {}",
                    by_source.words(),
                    by.display(),
                    source.words(),
                    path.display()
                );
            }
        }
    }
    if !skipped.is_empty() {
        println!("{} file(s) skipped:", skipped.len());
        for rejected in skipped {
            for line in rejected.to_string().lines() {
                println!("  {line}");
            }
        }
    }
}

/// `auth status`: where an app's credential comes from (environment variable, store, OAuth
/// sign-in), without the secrets.
pub fn auth_status(
    app: &str,
    stored: &aai_engine::web::credentials::Stored,
    env_var: Option<&str>,
    from_store: &[String],
) -> String {
    let mut parts = Vec::new();
    // The variables its MCP server takes from the store, and any kept there for it.
    let mut vars: Vec<&String> = from_store.iter().chain(stored.env.keys()).collect();
    vars.sort();
    vars.dedup();
    if !vars.is_empty() {
        let each: Vec<String> = vars
            .iter()
            .map(|var| {
                if stored.env.contains_key(*var) {
                    format!("{var} (stored)")
                } else {
                    format!("{var} (not stored: `auth set {app} --env {var}`)")
                }
            })
            .collect();
        parts.push(format!("its MCP server's {}", each.join(", ")));
    }
    if let Some(var) = env_var {
        let set = std::env::var_os(var).is_some_and(|v| !v.is_empty());
        parts.push(if set {
            format!("from the environment variable {var} (set; used first)")
        } else {
            format!("environment variable {var} not set")
        });
    }
    if stored.secret.is_some() {
        parts.push(format!(
            "stored key ({}; `auth set` replaces it)",
            stored.origin.as_deref().map_or_else(
                || "from an earlier version".to_owned(),
                |o| format!("sent only to {o}")
            )
        ));
    }
    if let Some(tokens) = &stored.oauth {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let expired = tokens.expires_at.is_some_and(|at| at <= now);
        let expiry = tokens.expires_at.map_or_else(
            || "no expiry given".to_owned(),
            |at| {
                format!(
                    "{} {}",
                    if expired { "expired" } else { "expires" },
                    aai_engine::web::rfc3339(at)
                )
            },
        );
        let refresh = match (tokens.refresh_token.is_some(), expired) {
            (true, true) => ", will be refreshed at the next call",
            (true, false) => ", refreshable",
            (false, true) => "; sign in again with `auth login`",
            (false, false) => "",
        };
        let scope = tokens
            .scope
            .as_deref()
            .map_or_else(String::new, |s| format!(", scopes: {s}"));
        parts.push(format!("OAuth authorized ({expiry}{refresh}{scope})"));
    }
    if parts.is_empty() {
        parts.push("nothing stored".to_owned());
    }
    format!("  {app:<40} {}", parts.join("; "))
}

/// `call --dry-run`: the plan as pretty JSON.
pub fn plan(plan: &serde_json::Value) {
    println!(
        "{}",
        serde_json::to_string_pretty(plan).unwrap_or_else(|_| plan.to_string())
    );
}

/// `validate`: one line per problem, or `ok`, then what the store or a call would refuse of
/// a valid file (`notes`, each already naming its file).
pub fn validation(path: &str, result: &Result<(), LoadError>, notes: &[String]) {
    if json() {
        let problems: Vec<String> = match result {
            Ok(()) => Vec::new(),
            Err(error) => error.to_string().lines().map(str::to_owned).collect(),
        };
        println!(
            "{}",
            serde_json::json!({"file": path, "valid": result.is_ok(), "problems": problems, "refused": notes})
        );
        return;
    }
    match result {
        Ok(()) => println!("{path}: ok"),
        Err(error) => println!("{error}"),
    }
    for note in notes {
        println!("{note}");
    }
}

/// `call`: the tool's output.
pub fn call_output(text: &str) {
    println!("{text}");
}

/// A plain line of CLI output. With `--json`, a line that is JSON already is printed as it
/// is, and text is gathered into one `{"message": …}` printed at the end ([`finish`]): every
/// command prints JSON when asked, those without data of their own included.
pub fn line(text: &str) {
    if json() && serde_json::from_str::<serde_json::Value>(text).is_err() {
        TEXT.lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(text.to_owned());
        return;
    }
    println!("{text}");
}

/// Text lines a `--json` run said, printed as one JSON object by [`finish`].
static TEXT: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

/// Prints what a `--json` run said as text, as `{"message": …}`.
pub fn finish() {
    let said = std::mem::take(
        &mut *TEXT
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner),
    );
    if !said.is_empty() {
        value(&serde_json::json!({"message": said.join("\n")}));
    }
}

/// Whether data is printed as JSON (`--json`), set once at start.
static JSON: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Sets the output format for the process: JSON (`--json`) or text (the default).
pub fn set_json(on: bool) {
    JSON.store(on, std::sync::atomic::Ordering::Relaxed);
}

/// Whether the command prints its data as JSON (`--json`).
pub fn json() -> bool {
    JSON.load(std::sync::atomic::Ordering::Relaxed)
}

/// Data as pretty JSON (`--json`).
pub fn value(value: &serde_json::Value) {
    println!(
        "{}",
        serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string())
    );
}

/// A report (a schedule's, a workflow run's): pretty JSON with `--json`, else indented text —
/// `key: value` lines, lists of plain values on one line, nested parts indented, text from
/// clients and descriptors sanitized.
pub fn report(value: &serde_json::Value) {
    if json() {
        return self::value(value);
    }
    let mut lines = Vec::new();
    text_of(value, 0, &mut lines);
    for line in lines {
        println!("{line}");
    }
}

fn scalar(value: &serde_json::Value) -> Option<String> {
    match value {
        serde_json::Value::Null => Some("—".to_owned()),
        serde_json::Value::String(s) => Some(cell(s).into_owned()),
        serde_json::Value::Array(items)
            if items.iter().all(|i| !i.is_object() && !i.is_array()) =>
        {
            Some(if items.is_empty() {
                "none".to_owned()
            } else {
                items
                    .iter()
                    .filter_map(scalar)
                    .collect::<Vec<_>>()
                    .join(", ")
            })
        }
        serde_json::Value::Object(_) | serde_json::Value::Array(_) => None,
        other => Some(other.to_string()),
    }
}

fn text_of(value: &serde_json::Value, indent: usize, lines: &mut Vec<String>) {
    let pad = " ".repeat(indent);
    match value {
        serde_json::Value::Object(map) => {
            for (key, item) in map {
                match scalar(item) {
                    Some(text) => lines.push(format!("{pad}{}: {text}", cell(key))),
                    None => {
                        lines.push(format!("{pad}{}:", cell(key)));
                        text_of(item, indent + 2, lines);
                    }
                }
            }
        }
        serde_json::Value::Array(items) => {
            for item in items {
                let start = lines.len();
                match scalar(item) {
                    Some(text) => lines.push(format!("{pad}{text}")),
                    None => text_of(item, indent + 2, lines),
                }
                // The first line of each entry carries the list mark.
                if let Some(first) = lines.get_mut(start) {
                    let body = first.trim_start().to_owned();
                    *first = format!("{pad}- {body}");
                }
            }
        }
        other => lines.push(format!("{pad}{}", scalar(other).unwrap_or_default())),
    }
}

/// Text from the daemon, a client or a descriptor, fit for a terminal: one line.
fn cell(text: &str) -> std::borrow::Cow<'_, str> {
    aai_descriptor::visible::visible(text)
}

/// `approvals`: every waiting question whole (arguments are never cut), sanitized.
pub fn approvals(pending: Option<&Vec<serde_json::Value>>) -> String {
    let pending = pending.map(Vec::as_slice).unwrap_or_default();
    if pending.is_empty() {
        return "no approvals are waiting".to_owned();
    }
    pending
        .iter()
        .map(|p| {
            let id = cell(p["id"].as_str().unwrap_or_default());
            format!(
                "{id}  {}\n    read it alone: aai-gateway approvals show {id}\n    answer: aai-gateway approvals answer {id} <{}>",
                question_text(p).replace('\n', "\n    "),
                choice_keys(p).join("|")
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// `approvals show ID`: one waiting question, then its arguments whole and their size.
///
/// # Errors
/// No approval `id` is waiting.
pub fn approval(pending: Option<&Vec<serde_json::Value>>, id: &str) -> anyhow::Result<String> {
    let found = pending
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .find(|p| p["id"] == id)
        .ok_or_else(|| {
            anyhow::anyhow!(
                "no approval {:?} is waiting (`aai-gateway approvals` lists them)",
                cell(id)
            )
        })?;
    let args = found["args"].as_str().unwrap_or_default();
    // Pretty JSON puts each argument on its own line; its strings stay escaped JSON.
    let pretty = serde_json::from_str::<serde_json::Value>(args)
        .ok()
        .and_then(|v| serde_json::to_string_pretty(&v).ok())
        .unwrap_or_else(|| args.to_owned());
    Ok(format!(
        "{}  client {}  {}:{}\n{}\n\narguments ({} characters, {} bytes), whole:\n{}\n\nanswer: aai-gateway approvals answer {} <{}>",
        cell(id),
        cell(found["client"].as_str().unwrap_or_default()),
        cell(found["app"].as_str().unwrap_or_default()),
        cell(found["tool"].as_str().unwrap_or_default()),
        // The question without its arguments, which follow once, whole.
        aai_descriptor::visible::visible_lines(
            found["heading"]
                .as_str()
                .or_else(|| found["message"].as_str())
                .unwrap_or_default()
        ),
        found["args_chars"],
        found["args_bytes"],
        aai_descriptor::visible::visible_lines(&pretty),
        cell(id),
        choice_keys(found).join("|")
    ))
}

/// A question's text as the daemon sent it, shown again through the sanitizer (a daemon of
/// another version may not have).
fn question_text(p: &serde_json::Value) -> String {
    aai_descriptor::visible::visible_lines(p["message"].as_str().unwrap_or_default()).into_owned()
}

fn choice_keys(p: &serde_json::Value) -> Vec<String> {
    p["choices"]
        .as_array()
        .map(|c| {
            c.iter()
                .filter_map(|c| c["answer"].as_str().map(|k| cell(k).into_owned()))
                .collect()
        })
        .unwrap_or_default()
}

/// `consent list`: the remembered grants (how long they last, since when, how given), then
/// the calls allowed once (from the audit log; nothing was remembered for them).
pub fn grants(
    grants: &[aai_audit::Grant],
    once: &[aai_audit::Row],
    pins: &std::collections::BTreeMap<String, std::collections::BTreeMap<String, aai_mcpapps::Pin>>,
) {
    if json() {
        let pins: serde_json::Map<String, serde_json::Value> = pins
            .iter()
            .map(|(app, tools)| {
                let tools: serde_json::Map<String, serde_json::Value> = tools
                    .iter()
                    .map(|(tool, pin)| (tool.clone(), serde_json::json!(pin.sha256)))
                    .collect();
                (app.clone(), serde_json::Value::Object(tools))
            })
            .collect();
        value(
            &serde_json::json!({"grants": grants, "once": once.iter().map(row_value).collect::<Vec<_>>(), "mcp_pins": pins}),
        );
        return;
    }
    grants_text(grants, once);
    if !pins.is_empty() {
        println!(
            "MCP tool definitions pinned (a changed one is refused until `aai-gateway consent approve APP [TOOL]`):"
        );
    }
    for (app, tools) in pins {
        for (tool, pin) in tools {
            println!(
                "{}:{}  sha256 {}",
                cell(app),
                cell(tool),
                pin.sha256.get(..16).unwrap_or_default()
            );
        }
    }
}

fn grants_text(grants: &[aai_audit::Grant], once: &[aai_audit::Row]) {
    if grants.is_empty() {
        println!("no grants");
    }
    for grant in grants {
        let what = match &grant.prefix {
            Some(prefix) => format!(
                "{}:{} commands starting with `{}`",
                cell(&grant.app),
                cell(grant.tool.as_deref().unwrap_or("*")),
                cell(prefix)
            ),
            None => format!(
                "{}:{}",
                cell(&grant.app),
                cell(grant.tool.as_deref().unwrap_or("*"))
            ),
        };
        let scope = match grant.scope {
            aai_audit::Scope::Always => "always".to_owned(),
            aai_audit::Scope::Session => format!(
                "session {} (until the client disconnects)",
                cell(grant.session.as_deref().unwrap_or("?"))
            ),
        };
        let client = if grant.client == aai_audit::EVERY_CLIENT {
            "* (every client)"
        } else {
            &grant.client
        };
        println!(
            "client={} {what}  {scope}  since {} via {}",
            cell(client),
            aai_audit::format_ts(grant.created_ms),
            if grant.via.is_empty() {
                "?"
            } else {
                &grant.via
            }
        );
    }
    if !once.is_empty() {
        println!("allowed once (not remembered):");
    }
    for row in once {
        let e = &row.entry;
        println!(
            "client={} {}:{}  once  at {} (audit row {})",
            cell(&e.caller),
            cell(&e.app),
            cell(&e.tool),
            aai_audit::format_ts(e.ts_ms),
            row.id
        );
    }
}

/// Audit rows, one line each; with `whole`, a row whose arguments were too long for it
/// prints them whole, as `whole` reads them from beside the chain.
pub fn rows(rows: &[aai_audit::Row], whole: Option<&dyn Fn(&aai_audit::Row) -> String>) {
    if json() {
        // One JSON object per line, as `audit export` writes them: `tail --follow` stays a stream.
        for row in rows {
            println!("{}", row_value(row));
        }
        return;
    }
    for row in rows {
        let e = &row.entry;
        let args = match (whole, &e.args_sha256) {
            (Some(whole), Some(_)) => whole(row),
            _ => e.args.clone(),
        };
        println!(
            "{:>6} {} {:<16} {}:{} {} {} risk={} {}ms args={}{}{}",
            row.id,
            aai_audit::format_ts(e.ts_ms),
            cell(&e.caller),
            cell(&e.app),
            cell(&e.tool),
            cell(&e.decision),
            cell(&e.result),
            cell(&e.risk),
            e.duration_ms,
            cell(&args),
            e.error
                .as_deref()
                .map(|err| format!(" error={}", cell(err)))
                .unwrap_or_default(),
            e.output
                .as_deref()
                .map(|out| format!(" output={}", cell(out)))
                .unwrap_or_default()
        );
    }
}

/// An audit row as JSON, with its time in words.
fn row_value(row: &aai_audit::Row) -> serde_json::Value {
    let mut value = serde_json::to_value(row).unwrap_or_default();
    value["time"] = serde_json::Value::String(aai_audit::format_ts(row.entry.ts_ms));
    value
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum ExportFormat {
    Jsonl,
    Csv,
}

fn csv_field(text: &str) -> String {
    if text.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text.to_owned()
    }
}

/// `audit export`.
pub fn export(rows: &[aai_audit::Row], format: ExportFormat) {
    match format {
        ExportFormat::Jsonl => {
            for row in rows {
                println!("{}", row_value(row));
            }
        }
        ExportFormat::Csv => {
            println!(
                "id,time,call_id,caller,app,tool,args,decision,result,risk,duration_ms,error,prev_hash,hash,output"
            );
            for row in rows {
                let e = &row.entry;
                let fields = [
                    row.id.to_string(),
                    aai_audit::format_ts(e.ts_ms),
                    e.call_id.clone(),
                    e.caller.clone(),
                    e.app.clone(),
                    e.tool.clone(),
                    e.args.clone(),
                    e.decision.clone(),
                    e.result.clone(),
                    e.risk.clone(),
                    e.duration_ms.to_string(),
                    e.error.clone().unwrap_or_default(),
                    row.prev_hash.clone(),
                    row.hash.clone(),
                    e.output.clone().unwrap_or_default(),
                ];
                println!(
                    "{}",
                    fields
                        .iter()
                        .map(|f| csv_field(f))
                        .collect::<Vec<_>>()
                        .join(",")
                );
            }
        }
    }
}

/// Asks the person at the terminal (`call` in an interactive shell): y allows this call once.
pub struct TerminalAsker;

impl aai_engine::consent::Asker for TerminalAsker {
    fn ask<'a>(
        &'a self,
        question: &'a aai_engine::consent::Question,
    ) -> aai_executor::BoxFuture<
        'a,
        Result<aai_engine::consent::Answer, aai_engine::consent::Unanswered>,
    > {
        use aai_engine::consent::{Answer, Unanswered};
        let message = question.message();
        Box::pin(async move {
            let read = tokio::task::spawn_blocking(move || {
                use std::io::Write;
                let mut err = std::io::stderr();
                let _ = write!(err, "{message}\nAllow this call once? [y/N] ");
                let _ = err.flush();
                let mut line = String::new();
                std::io::stdin().read_line(&mut line).map(|_| line)
            })
            .await;
            match read {
                Ok(Ok(line)) if matches!(line.trim(), "y" | "Y" | "yes" | "Yes") => {
                    Ok(Answer::AllowOnce)
                }
                Ok(Ok(_)) => Err(Unanswered::Declined("the user answered no".into())),
                _ => Err(Unanswered::CannotAsk("cannot read the terminal".into())),
            }
        })
    }

    fn via(&self) -> &'static str {
        "terminal"
    }
}
