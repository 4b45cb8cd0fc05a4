//! The files app: `file_read`, `file_write`, `file_edit`, `file_search`, `file_watch`, all
//! inside the [`Sandbox`].

use std::path::Path;
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use aai_descriptor::{AaiError, Descriptor, ErrorKind};
use aai_executor::BoxFuture;
use aai_sandbox::Contained as _;
use aai_sandbox::files::{Sandbox, outside, read_checked, too_big};
use serde_json::{Map, Value, json};

use crate::{Call, Setup, Toolset};

pub static DESCRIPTOR: LazyLock<Arc<Descriptor>> =
    LazyLock::new(|| crate::shipped("local.files", include_str!("../toolsets/files.aai.json")));

/// The files toolset.
pub struct Files {
    setup: Setup,
}

impl Files {
    pub fn new(setup: &Setup) -> Self {
        Self {
            setup: setup.clone(),
        }
    }
}

impl Toolset for Files {
    fn descriptor(&self) -> &Arc<Descriptor> {
        &DESCRIPTOR
    }

    fn run<'a>(&'a self, call: Call<'a>) -> BoxFuture<'a, Result<Value, AaiError>> {
        Box::pin(async move {
            let sandbox = self.setup.sandbox(call.roots);
            // Checked again as it runs: the path may have become a link since it was asked.
            if !call.approved
                && let Some(what) = writes_run_later(&sandbox, call.tool, call.args)
            {
                return Err(AaiError::new(
                    ErrorKind::PermissionDenied,
                    format!("{what} is written only when the user approved this very call"),
                )
                .with_detail(serde_json::json!({"reason": "runs_later"})));
            }
            if call.tool == "file_watch" {
                return watch(&sandbox, call.args).await;
            }
            let (tool, args) = (call.tool.to_owned(), call.args.clone());
            tokio::task::spawn_blocking(move || match tool.as_str() {
                "file_read" => read(&sandbox, &args),
                "file_write" => write(&sandbox, &args),
                "file_edit" => edit(&sandbox, &args),
                "file_search" => search(&sandbox, &args),
                other => Err(crate::unknown(&DESCRIPTOR.app_id, other)),
            })
            .await
            .map_err(|e| aai_toolset::failed(e.to_string()))?
        })
    }

    fn refusal(&self, call: &Call<'_>) -> Option<AaiError> {
        let sandbox = self.setup.sandbox(call.roots);
        refusal(&sandbox, call.tool, call.args)
    }

    fn must_ask<'a>(&'a self, call: &'a Call<'a>) -> BoxFuture<'a, Option<String>> {
        let sandbox = self.setup.sandbox(call.roots);
        let what = writes_run_later(&sandbox, call.tool, call.args);
        Box::pin(async move {
            what.map(|what| {
                format!(
                    "it writes {what}, which makes something run later without the agent (a git hook or config, .envrc, editor or agent settings, a shell start-up file): asked every time"
                )
            })
        })
    }

    fn waits_ms(&self, tool: &str, args: &Map<String, Value>) -> u64 {
        match tool {
            "file_watch" => arg_u64(args, "wait_ms").unwrap_or(10_000),
            _ => 0,
        }
    }
}

/// The file a `file_write` or `file_edit` would change when it is one that makes something
/// run later ([`aai_contain::later::runs_later`]), judged on the path as written and as
/// resolved.
fn writes_run_later(sandbox: &Sandbox, tool: &str, args: &Map<String, Value>) -> Option<String> {
    if !matches!(tool, "file_write" | "file_edit") {
        return None;
    }
    let path = args.get("path").and_then(Value::as_str)?;
    let resolved = sandbox.check_write(path).ok();
    let hit = aai_contain::later::runs_later(Path::new(path)).is_some()
        || resolved
            .as_deref()
            .is_some_and(|p| aai_contain::later::runs_later(p).is_some());
    hit.then(|| resolved.map_or_else(|| path.to_owned(), |p| p.display().to_string()))
}

/// What the sandbox refuses of a call before it runs: each path argument checked as the tool
/// will use it (read, or written), and a `file_write` over the size limit. What only the run
/// can know (a missing file, text that does not occur) is left to the run.
fn refusal(sandbox: &Sandbox, tool: &str, args: &Map<String, Value>) -> Option<AaiError> {
    let path = |name: &str| args.get(name).and_then(Value::as_str);
    let checked = match tool {
        "file_read" | "file_watch" => path("path").map(|p| sandbox.check_read(p).map(drop)),
        "file_search" => path("directory").map(|p| sandbox.check_read(p).map(drop)),
        "file_edit" => path("path").map(|p| {
            sandbox
                .check_read(p)
                .and_then(|_| sandbox.check_write(p))
                .map(drop)
        }),
        "file_write" => path("path").map(|p| {
            let size = path("content").map_or(0, str::len) as u64;
            if size > sandbox.max_file_size {
                return Err(too_big(p, size, sandbox.max_file_size));
            }
            sandbox.check_write(p).map(drop)
        }),
        _ => None,
    };
    checked.and_then(Result::err)
}

/// Lines `file_read` returns when no `limit` is given.
const DEFAULT_LINES: usize = 2000;

fn arg_str<'a>(args: &'a Map<String, Value>, name: &str) -> Result<&'a str, AaiError> {
    args.get(name).and_then(Value::as_str).ok_or_else(|| {
        AaiError::new(ErrorKind::InvalidParams, format!("`{name}` is required"))
            .with_detail(json!({"field": name}))
    })
}

fn arg_u64(args: &Map<String, Value>, name: &str) -> Option<u64> {
    args.get(name).and_then(Value::as_u64)
}

/// Whether bytes look binary: a NUL in the first 8 KiB, or not UTF-8.
fn is_binary(bytes: &[u8]) -> bool {
    bytes[..bytes.len().min(8192)].contains(&0) || std::str::from_utf8(bytes).is_err()
}

pub fn read(sandbox: &Sandbox, args: &Map<String, Value>) -> Result<Value, AaiError> {
    let input = arg_str(args, "path")?;
    let (path, bytes) = read_checked(sandbox, input)?;
    if is_binary(&bytes) {
        return Ok(json!({"path": path, "binary": true, "size": bytes.len(),
            "note": "binary file; its content is not shown"}));
    }
    let text = String::from_utf8_lossy(&bytes);
    let offset = usize::try_from(arg_u64(args, "offset").unwrap_or(1).max(1)).unwrap_or(1);
    let limit = usize::try_from(arg_u64(args, "limit").unwrap_or(DEFAULT_LINES as u64))
        .unwrap_or(DEFAULT_LINES);
    let total = text.lines().count();
    let content: Vec<&str> = text.lines().skip(offset - 1).take(limit).collect();
    let returned = content.len();
    Ok(json!({
        "path": path,
        "content": content.join("\n"),
        "start_line": offset,
        "lines": returned,
        "total_lines": total,
        "truncated": offset - 1 + returned < total,
    }))
}

/// Replaces `path` with `bytes` atomically, race-free (see [`crate::beneath`]).
fn replace(sandbox: &Sandbox, path: &Path, input: &str, bytes: &[u8]) -> Result<(), AaiError> {
    let root = sandbox.root_of(path).ok_or_else(|| outside(input))?;
    aai_sandbox::beneath::replace(root, path, input, bytes)
}

pub fn write(sandbox: &Sandbox, args: &Map<String, Value>) -> Result<Value, AaiError> {
    let input = arg_str(args, "path")?;
    let content = arg_str(args, "content")?;
    if content.len() as u64 > sandbox.max_file_size {
        return Err(too_big(input, content.len() as u64, sandbox.max_file_size));
    }
    let path = sandbox.check_write(input)?;
    let existed = path.exists();
    replace(sandbox, &path, input, content.as_bytes())?;
    Ok(json!({"path": path, "bytes_written": content.len(), "created": !existed}))
}

pub fn edit(sandbox: &Sandbox, args: &Map<String, Value>) -> Result<Value, AaiError> {
    let input = arg_str(args, "path")?;
    let old = arg_str(args, "old_string")?;
    let new = arg_str(args, "new_string")?;
    if old.is_empty() {
        return Err(AaiError::new(
            ErrorKind::InvalidParams,
            "`old_string` must not be empty",
        ));
    }
    let (path, bytes) = read_checked(sandbox, input)?;
    sandbox.check_write(input)?;
    let text = String::from_utf8(bytes).map_err(|_| {
        AaiError::new(
            ErrorKind::InvalidParams,
            format!("{input:?} is not UTF-8 text; it cannot be edited by replacement"),
        )
    })?;
    let count = text.matches(old).count();
    match count {
        0 => Err(AaiError::new(
            ErrorKind::InvalidParams,
            format!("`old_string` does not occur in {input:?}; read the file and copy the text exactly, whitespace included"),
        )),
        1 => {
            let edited = text.replacen(old, new, 1);
            if edited.len() as u64 > sandbox.max_file_size {
                return Err(too_big(input, edited.len() as u64, sandbox.max_file_size));
            }
            replace(sandbox, &path, input, edited.as_bytes())?;
            Ok(json!({"path": path, "replaced": 1}))
        }
        n => Err(AaiError::new(
            ErrorKind::InvalidParams,
            format!("`old_string` occurs {n} times in {input:?}; include more of the surrounding text so it matches once"),
        )
        .with_detail(json!({"matches": n}))),
    }
}

pub fn search(sandbox: &Sandbox, args: &Map<String, Value>) -> Result<Value, AaiError> {
    use grep_regex::RegexMatcher;
    use grep_searcher::{BinaryDetection, SearcherBuilder, sinks::UTF8};

    let input = arg_str(args, "directory")?;
    let pattern = arg_str(args, "pattern")?;
    let by_content = args.get("type").and_then(Value::as_str) == Some("content");
    let max =
        usize::try_from(arg_u64(args, "max_results").unwrap_or(50).clamp(1, 1000)).unwrap_or(50);
    let root = sandbox.check_read(input)?;
    let bad_pattern = |e: String| {
        AaiError::new(
            ErrorKind::InvalidParams,
            format!("pattern {pattern:?}: {e}"),
        )
    };
    let glob = if by_content {
        None
    } else {
        Some(
            globset::Glob::new(pattern)
                .map_err(|e| bad_pattern(e.to_string()))?
                .compile_matcher(),
        )
    };
    let matcher = if by_content {
        Some(RegexMatcher::new(pattern).map_err(|e| bad_pattern(e.to_string()))?)
    } else {
        None
    };
    let mut searcher = SearcherBuilder::new()
        .binary_detection(BinaryDetection::quit(0))
        .line_number(true)
        .build();
    let mut results = Vec::new();
    let mut truncated = false;
    let judge = sandbox.clone();
    let top = root.clone();
    // Denied folders are not entered at all.
    let walker = ignore::WalkBuilder::new(&root)
        .follow_links(false)
        .filter_entry(move |entry| {
            entry.path() == top || judge.check_read(&entry.path().to_string_lossy()).is_ok()
        })
        .build();
    for entry in walker.flatten() {
        if results.len() >= max {
            truncated = true;
            break;
        }
        let path = entry.path();
        let text = path.to_string_lossy();
        // Every file found is judged by the sandbox too (denied patterns, the gateway's files).
        if path != root && sandbox.check_read(&text).is_err() {
            continue;
        }
        if let Some(glob) = &glob {
            let relative = path.strip_prefix(&root).unwrap_or(path);
            let name = path.file_name().map(Path::new).unwrap_or(relative);
            if path != root && (glob.is_match(name) || glob.is_match(relative)) {
                results.push(json!({"path": path}));
            }
            continue;
        }
        if let Some(matcher) = &matcher
            && entry.file_type().is_some_and(|t| t.is_file())
            && entry
                .metadata()
                .is_ok_and(|m| m.len() <= sandbox.max_file_size)
        {
            let _ = searcher.search_path(
                matcher,
                path,
                UTF8(|line, text| {
                    if results.len() >= max {
                        return Ok(false);
                    }
                    results.push(json!({"path": path, "line": line, "text": text.trim_end()}));
                    Ok(true)
                }),
            );
        }
    }
    Ok(
        json!({"directory": root, "results": results, "truncated": truncated || results.len() >= max}),
    )
}

/// Whether a changed path may be named to the agent: its folder resolves inside the sandbox
/// (so nothing under a linked folder outside is named, even once deleted), and the entry
/// itself, when it still exists and is not a link, resolves inside too.
fn reportable(sandbox: &Sandbox, path: &Path) -> bool {
    let folder_inside = path
        .parent()
        .is_some_and(|parent| sandbox.check_read(&parent.to_string_lossy()).is_ok());
    if !folder_inside {
        return false;
    }
    match std::fs::symlink_metadata(path) {
        // A link inside: its own name is inside, wherever it points.
        Ok(meta) if meta.file_type().is_symlink() => true,
        Ok(_) => sandbox.check_read(&path.to_string_lossy()).is_ok(),
        Err(_) => true,
    }
}

/// `file_watch`: waits up to `wait_ms` (default 10 s) for changes under `path`, then returns
/// the batch that arrived (gathered for another 200 ms after the first one).
pub async fn watch(sandbox: &Sandbox, args: &Map<String, Value>) -> Result<Value, AaiError> {
    use notify::{EventKind, RecursiveMode, Watcher};

    let input = arg_str(args, "path")?;
    let root = sandbox.check_read(input)?;
    let wanted: Vec<String> = args
        .get("events")
        .and_then(Value::as_array)
        .map(|e| {
            e.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_else(|| vec!["create".into(), "modify".into(), "delete".into()]);
    let recursive = args
        .get("recursive")
        .and_then(Value::as_bool)
        .unwrap_or(true);
    let wait = Duration::from_millis(arg_u64(args, "wait_ms").unwrap_or(10_000).min(300_000));
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    // Links are not followed: a linked folder's contents are outside what was checked.
    let mut watcher = notify::RecommendedWatcher::new(
        move |event: notify::Result<notify::Event>| {
            if let Ok(event) = event {
                let _ = tx.send(event);
            }
        },
        notify::Config::default().with_follow_symlinks(false),
    )
    .map_err(|e| {
        AaiError::new(
            ErrorKind::AutomationFailed,
            format!("cannot watch {input:?}: {e}"),
        )
    })?;
    let mode = if recursive {
        RecursiveMode::Recursive
    } else {
        RecursiveMode::NonRecursive
    };
    watcher.watch(&root, mode).map_err(|e| {
        AaiError::new(
            ErrorKind::AutomationFailed,
            format!("cannot watch {input:?}: {e}"),
        )
    })?;
    let mut events = Vec::new();
    let deadline = tokio::time::Instant::now() + wait;
    let mut settle: Option<tokio::time::Instant> = None;
    loop {
        let until = settle.map_or(deadline, |s| s.min(deadline));
        let Ok(Some(event)) = tokio::time::timeout_at(until, rx.recv()).await else {
            break;
        };
        let kind = match event.kind {
            EventKind::Create(_) => "create",
            EventKind::Modify(notify::event::ModifyKind::Name(_)) => "rename",
            EventKind::Modify(_) => "modify",
            EventKind::Remove(_) => "delete",
            _ => continue,
        };
        let kind = if kind == "rename" { "modify" } else { kind };
        if !wanted.iter().any(|w| w == kind) {
            continue;
        }
        for path in event.paths {
            if !reportable(sandbox, &path) {
                continue;
            }
            let entry = json!({"event": kind, "path": path});
            if !events.contains(&entry) {
                events.push(entry);
            }
        }
        if settle.is_none() && !events.is_empty() {
            settle = Some(tokio::time::Instant::now() + Duration::from_millis(200));
        }
    }
    drop(watcher);
    Ok(json!({"path": root, "events": events, "waited_ms": wait.as_millis() as u64}))
}
