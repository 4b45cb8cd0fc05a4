//! Draft descriptors from a live system (`aai-gateway describe`, the agent's
//! `aai_describe`): the I/O around [`aai_describe`] — walking a D-Bus service's object tree
//! within a budget, reading an OpenAPI document's text.

pub mod tools;

use std::collections::VecDeque;
use std::time::Duration;

use aai_describe::Draft;
use aai_descriptor::{AaiError, Bus, ErrorKind};
use aai_executor::DbusExecutor;
use serde_json::{Value, json};

/// The most objects of a service introspected for one draft.
pub const MOST_OBJECTS: usize = 64;
/// How long a walk of a service's objects may take.
const WALK_TIME: Duration = Duration::from_secs(30);

/// A D-Bus service to draft.
#[derive(Debug, Clone, Default)]
pub struct DbusSource {
    pub name: String,
    pub system: bool,
    /// Start the walk here instead of `/`.
    pub path: Option<String>,
    pub interface: Option<String>,
}

fn failed(message: impl Into<String>) -> AaiError {
    AaiError::new(ErrorKind::AutomationFailed, message)
}

/// Introspects `source`'s objects (from its path, breadth first, at most [`MOST_OBJECTS`],
/// starting the service when it is activatable) and drafts a descriptor from them.
///
/// # Errors
/// The service does not answer, or offers nothing to call.
pub async fn dbus(executor: &DbusExecutor, source: &DbusSource) -> Result<Draft, AaiError> {
    let bus = if source.system {
        Bus::System
    } else {
        Bus::Session
    };
    let objects = tokio::time::timeout(WALK_TIME, walk(executor, bus, source))
        .await
        .map_err(|_| {
            failed(format!(
                "{}: introspection took longer than {} s",
                source.name,
                WALK_TIME.as_secs()
            ))
        })??;
    let options = aai_describe::dbus::Options {
        service: source.name.clone(),
        system: source.system,
        interface: source.interface.clone(),
    };
    aai_describe::dbus::draft(&options, &objects).map_err(|e| failed(e.to_string()))
}

async fn walk(
    executor: &DbusExecutor,
    bus: Bus,
    source: &DbusSource,
) -> Result<Vec<(String, String)>, AaiError> {
    let start = source.path.clone().unwrap_or_else(|| "/".to_owned());
    let mut queue = VecDeque::from([start]);
    let mut objects = Vec::new();
    let mut seen = 0;
    while let Some(path) = queue.pop_front() {
        seen += 1;
        if seen > MOST_OBJECTS {
            break;
        }
        let xml = match executor.introspect_xml(bus, &source.name, &path).await {
            Ok(xml) => xml,
            // The first object must answer; one deeper that does not is skipped.
            Err(error) if seen == 1 => return Err(error),
            Err(_) => continue,
        };
        if let Ok(children) = aai_describe::dbus::children(&path, &xml) {
            queue.extend(children);
        }
        objects.push((path, xml));
    }
    Ok(objects)
}

/// The names on the bus, each with what a draft of it would hold: running services are
/// introspected (a few objects), activatable ones only named (checking would start them).
///
/// # Errors
/// No connection to the bus.
pub async fn dbus_names(executor: &DbusExecutor, system: bool) -> Result<Vec<Value>, AaiError> {
    let bus = if system { Bus::System } else { Bus::Session };
    let (running, activatable) = executor.bus_names(bus).await?;
    let mut out = Vec::new();
    for name in &running {
        let source = DbusSource {
            name: name.clone(),
            system,
            ..DbusSource::default()
        };
        let found = tokio::time::timeout(Duration::from_secs(5), dbus(executor, &source)).await;
        match found {
            Ok(Ok(draft)) => {
                out.push(json!({"name": name, "running": true, "tools": draft.tools().len()}))
            }
            Ok(Err(error)) => {
                out.push(json!({"name": name, "running": true, "tools": 0, "why": error.message}))
            }
            Err(_) => out.push(
                json!({"name": name, "running": true, "tools": 0, "why": "no answer within 5 s"}),
            ),
        }
    }
    for name in activatable.iter().filter(|n| !running.contains(n)) {
        out.push(json!({"name": name, "running": false}));
    }
    Ok(out)
}

/// The largest document read from the network.
pub const MOST_BYTES: usize = 64 << 20;

/// A document fetched with `client`: a success status and at most [`MOST_BYTES`], read as it
/// arrives (a larger one is refused before it is all in memory).
///
/// # Errors
/// The request fails, the status is not a success, or the body is too large.
pub async fn document(client: &reqwest::Client, url: &str) -> Result<String, AaiError> {
    let mut response = client
        .get(url)
        .send()
        .await
        .map_err(|e| failed(format!("{url}: {e}")))?;
    if !response.status().is_success() {
        return Err(failed(format!("{url} answered {}", response.status())));
    }
    let mut body = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| failed(format!("{url}: {e}")))?
    {
        body.extend_from_slice(&chunk);
        if body.len() > MOST_BYTES {
            return Err(AaiError::new(
                ErrorKind::InvalidParams,
                format!("{url} is larger than 64 MiB"),
            ));
        }
    }
    Ok(String::from_utf8_lossy(&body).into_owned())
}

/// A draft from an OpenAPI document's text (JSON).
///
/// # Errors
/// The text is not a JSON OpenAPI document, or no operation converts.
pub fn openapi(text: &str, options: &aai_describe::openapi::Options) -> Result<Draft, AaiError> {
    let doc: Value = serde_json::from_str(text).map_err(|e| {
        AaiError::new(
            ErrorKind::InvalidParams,
            format!("not a JSON OpenAPI document ({e}); a YAML one can be converted with any YAML-to-JSON tool first"),
        )
    })?;
    aai_describe::openapi::draft(&doc, options)
        .map_err(|e| AaiError::new(ErrorKind::InvalidParams, e.to_string()))
}

/// Elements read, at most, for one accessibility draft.
pub const MOST_ELEMENTS: usize = 4000;

/// Reads the accessibility tree of the running application `app` (its accessible name, any
/// case, or its process id) on the accessibility bus the session bus at `session_bus` names,
/// and drafts a descriptor from it (see [`a11y_tree`]).
///
/// # Errors
/// As [`a11y_tree`], or its tree offers nothing to make a tool of.
pub async fn a11y(
    session_bus: Option<&str>,
    app: &str,
    app_id: Option<&str>,
    protected: &[String],
) -> Result<Draft, AaiError> {
    let (name, tree) = a11y_tree(session_bus, app, protected).await?;
    let app_id = app_id.map_or_else(
        || {
            aai_describe::app_id_from(
                &format!("a11y.{}", name.to_lowercase().replace(' ', "-")),
                "a11y.app",
            )
        },
        str::to_owned,
    );
    aai_describe::a11y::draft(&name, &app_id, &tree).map_err(|e| failed(e.to_string()))
}

/// The accessible name and tree of the running application `app` (name or process id),
/// within [`WALK_TIME`] and [`MOST_ELEMENTS`]; an app matching one of `protected` is not read.
///
/// # Errors
/// No accessibility bus, the application is not running, or it is protected.
pub async fn a11y_tree(
    session_bus: Option<&str>,
    app: &str,
    protected: &[String],
) -> Result<(String, aai_describe::a11y::UiNode), AaiError> {
    let bus = aai_executor::atspi::A11yBus::connect(session_bus).await?;
    let (root, name) = aai_executor::atspi::application(&bus, app).await?;
    let protection = aai_executor::atspi::Protection::default();
    protection.set(protected.to_vec());
    let pid = bus.pid(&root.dest).await;
    aai_executor::atspi::refuse_protected(&bus, &name, &root, pid, &protection).await?;
    let tree = tokio::time::timeout(WALK_TIME, read_tree(&bus, &root))
        .await
        .map_err(|_| {
            failed(format!(
                "{name}: reading its tree took longer than {} s",
                WALK_TIME.as_secs()
            ))
        })?;
    Ok((name, tree))
}

/// The tree below `root`, breadth first, at most [`MOST_ELEMENTS`] elements.
async fn read_tree(
    bus: &aai_executor::atspi::A11yBus,
    root: &aai_executor::atspi::Node,
) -> aai_describe::a11y::UiNode {
    // Read level by level, then assemble: the nodes in reading order with their parent.
    let mut read: Vec<(Option<usize>, aai_describe::a11y::UiNode)> = Vec::new();
    let mut queue = VecDeque::from([(None, root.clone())]);
    while let Some((parent, node)) = queue.pop_front() {
        if read.len() >= MOST_ELEMENTS {
            break;
        }
        let index = read.len();
        let interfaces = bus.interfaces(&node).await;
        let actions = if interfaces.iter().any(|i| i == "Action") {
            bus.actions(&node).await
        } else {
            Vec::new()
        };
        let editable = interfaces.iter().any(|i| i == "EditableText");
        let role = bus.role(&node).await;
        let placed = editable || role == "label";
        read.push((
            parent,
            aai_describe::a11y::UiNode {
                role,
                name: bus.name(&node).await,
                actions,
                interfaces,
                states: bus
                    .states(&node)
                    .await
                    .into_iter()
                    .map(str::to_owned)
                    .collect(),
                labels: if editable {
                    bus.labels(&node).await
                } else {
                    Vec::new()
                },
                bounds: if placed {
                    bus.extents(&node)
                        .await
                        .ok()
                        .map(|(x, y, w, h)| [x, y, w, h])
                } else {
                    None
                },
                children: Vec::new(),
            },
        ));
        for child in bus.children(&node).await.unwrap_or_default() {
            queue.push_back((Some(index), child));
        }
    }
    // Children were read after their parents: attach from the last back to the first.
    let mut nodes: Vec<Option<aai_describe::a11y::UiNode>> = Vec::with_capacity(read.len());
    let parents: Vec<Option<usize>> = read.iter().map(|(p, _)| *p).collect();
    nodes.extend(read.into_iter().map(|(_, n)| Some(n)));
    for index in (1..nodes.len()).rev() {
        if let (Some(parent), Some(node)) = (parents[index], nodes[index].take())
            && let Some(Some(parent)) = nodes.get_mut(parent)
        {
            parent.children.insert(0, node);
        }
    }
    nodes.into_iter().next().flatten().unwrap_or_default()
}
