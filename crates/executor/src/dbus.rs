//! The D-Bus executor (the `linux` section, `automation: "dbus"`).
//!
//! Arguments travel as typed D-Bus values. Their order and types come from the tool's `args`
//! and `signature` when the descriptor gives them, else from introspecting the service. A call
//! to a service that is not running but activatable starts it, as D-Bus does.

mod convert;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use aai_descriptor::{AaiError, Bus, ErrorKind, LinuxTool, template};
use serde_json::{Map, Value, json};
use tokio::sync::OnceCell;
use zbus::Connection;
use zbus::zvariant::{Signature, Structure, StructureBuilder};

use crate::{BoxFuture, Executor, Invocation};

/// Calls D-Bus methods. Holds one connection per bus and a cache of introspected methods.
pub struct DbusExecutor {
    /// The session bus address; `None` takes it from the environment.
    session_address: Option<String>,
    session: OnceCell<Connection>,
    system: OnceCell<Connection>,
    methods: Mutex<HashMap<MethodKey, Arc<MethodInfo>>>,
    /// Bounds calls in flight: buses cap pending replies per connection (128 by default in
    /// dbus-daemon) and answer `LimitsExceeded` past that.
    in_flight: tokio::sync::Semaphore,
}

/// Calls in flight at once, per executor; the rest wait their turn (within their timeout).
const MAX_IN_FLIGHT: usize = 64;

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct MethodKey {
    bus: Bus,
    service: String,
    object: String,
    interface: String,
    method: String,
}

/// The in-args of a method: their types and, when introspection names them, their names.
#[derive(Debug)]
struct MethodInfo {
    types: Vec<Signature>,
    names: Vec<Option<String>>,
}

/// Where one call goes.
struct Target<'a> {
    key: MethodKey,
    tool: &'a LinuxTool,
    parameters: Option<Value>,
}

impl Executor for DbusExecutor {
    fn call<'a>(&'a self, invocation: Invocation<'a>) -> BoxFuture<'a, Result<Value, AaiError>> {
        Box::pin(async move {
            let timeout = invocation.timeout;
            let app = invocation.descriptor.app_id.as_str();
            let call = async {
                let _permit = self.in_flight.acquire().await;
                self.call_inner(invocation).await
            };
            match tokio::time::timeout(timeout, call).await {
                Ok(result) => result,
                Err(_) => Err(AaiError::new(
                    ErrorKind::Timeout,
                    format!(
                        "{app}: no reply within {} s; the app may be busy or hung. Retry, or raise the tool's `timeout` in its aai.json",
                        timeout.as_secs_f64()
                    ),
                )),
            }
        })
    }

    fn plan(&self, invocation: Invocation<'_>) -> Result<Value, AaiError> {
        let target = target(&invocation)?;
        let key = &target.key;
        let args = match &target.tool.args {
            Some(template) => Value::Array(template_values(
                template,
                invocation.args,
                target.parameters.as_ref(),
                key,
            )?),
            None => Value::Object(invocation.args.clone()),
        };
        Ok(json!({
            "dbus": {
                "bus": bus_name(key.bus),
                "destination": key.service,
                "path": key.object,
                "interface": key.interface,
                "method": key.method,
                // Without a signature in the descriptor, the service is introspected at call time.
                "signature": target.tool.signature,
                "args": args,
            }
        }))
    }
}

impl Default for DbusExecutor {
    fn default() -> Self {
        Self {
            session_address: None,
            session: OnceCell::new(),
            system: OnceCell::new(),
            methods: Mutex::default(),
            in_flight: tokio::sync::Semaphore::new(MAX_IN_FLIGHT),
        }
    }
}

impl DbusExecutor {
    /// An executor whose session bus is at `address` instead of the environment's.
    pub fn with_session_address(address: impl Into<String>) -> Self {
        Self {
            session_address: Some(address.into()),
            ..Self::default()
        }
    }

    /// The introspection XML of `service`'s object at `path` (a call that starts an
    /// activatable service).
    ///
    /// # Errors
    /// No connection to the bus, or the service did not answer.
    pub async fn introspect_xml(
        &self,
        bus: Bus,
        service: &str,
        path: &str,
    ) -> Result<String, AaiError> {
        let connection = self.connection(bus).await?;
        let failed = |what: String| {
            AaiError::new(
                ErrorKind::AutomationFailed,
                format!("{service} {path}: {what}"),
            )
        };
        let reply = connection
            .call_method(
                Some(service),
                path,
                Some("org.freedesktop.DBus.Introspectable"),
                "Introspect",
                &(),
            )
            .await
            .map_err(|e| failed(format!("introspection failed: {e}")))?;
        reply
            .body()
            .deserialize()
            .map_err(|e| failed(format!("unreadable introspection reply: {e}")))
    }

    /// The well-known names on `bus`: those owned now and those the bus can start.
    ///
    /// # Errors
    /// No connection to the bus.
    pub async fn bus_names(&self, bus: Bus) -> Result<(Vec<String>, Vec<String>), AaiError> {
        let connection = self.connection(bus).await?;
        let mut lists = Vec::new();
        for method in ["ListNames", "ListActivatableNames"] {
            let reply = connection
                .call_method(
                    Some("org.freedesktop.DBus"),
                    "/org/freedesktop/DBus",
                    Some("org.freedesktop.DBus"),
                    method,
                    &(),
                )
                .await
                .map_err(|e| {
                    AaiError::new(ErrorKind::AutomationFailed, format!("{method}: {e}"))
                })?;
            let mut names: Vec<String> = reply.body().deserialize().unwrap_or_default();
            names.retain(|n| !n.starts_with(':') && n != "org.freedesktop.DBus");
            names.sort();
            lists.push(names);
        }
        let activatable = lists.pop().unwrap_or_default();
        Ok((lists.pop().unwrap_or_default(), activatable))
    }

    async fn call_inner(&self, invocation: Invocation<'_>) -> Result<Value, AaiError> {
        let target = target(&invocation)?;
        let connection = self.connection(target.key.bus).await?;
        let (types, values) = self.in_args(connection, &target, invocation.args).await?;
        let body = build_body(&types, &values)?;
        let key = &target.key;
        // A method without in-args gets an empty body, not an empty struct.
        let reply = match &body {
            Some(body) => self.send(connection, key, body).await,
            None => self.send(connection, key, &()).await,
        };
        let reply = reply.map_err(|error| {
            if is_signature_error(&error) {
                // The cached signature may be stale (the service was upgraded): introspect again next time.
                self.forget(key);
            }
            map_error(&error, key)
        })?;
        let output = reply_to_json(&reply).map_err(|e| {
            AaiError::new(
                ErrorKind::AutomationFailed,
                format!(
                    "{}: cannot read the reply of {}: {e}",
                    key.service, key.method
                ),
            )
        })?;
        parse_output(output, target.tool.output_parser.as_deref(), key)
    }

    async fn connection(&self, bus: Bus) -> Result<&Connection, AaiError> {
        let cell = match bus {
            Bus::Session => &self.session,
            Bus::System => &self.system,
        };
        cell.get_or_try_init(|| async {
            match bus {
                Bus::Session => match &self.session_address {
                    Some(address) => zbus::connection::Builder::address(address.as_str())?.build().await,
                    None => Connection::session().await,
                },
                Bus::System => Connection::system().await,
            }
        })
        .await
        .map_err(|error| {
            let hint = match bus {
                Bus::Session => "is a session bus running and DBUS_SESSION_BUS_ADDRESS set in the gateway's environment?",
                Bus::System => "is the system bus running?",
            };
            AaiError::new(
                ErrorKind::AutomationFailed,
                format!("cannot connect to the D-Bus {} bus: {error}; {hint}", bus_name(bus)),
            )
        })
    }

    async fn send<B>(
        &self,
        connection: &Connection,
        key: &MethodKey,
        body: &B,
    ) -> zbus::Result<zbus::Message>
    where
        B: serde::Serialize + zbus::zvariant::DynamicType,
    {
        connection
            .call_method(
                Some(key.service.as_str()),
                key.object.as_str(),
                Some(key.interface.as_str()),
                key.method.as_str(),
                body,
            )
            .await
    }

    fn forget(&self, key: &MethodKey) {
        if let Ok(mut methods) = self.methods.lock() {
            methods.remove(key);
        }
    }

    /// The in-arg types and values of the call, in order.
    async fn in_args(
        &self,
        connection: &Connection,
        target: &Target<'_>,
        args: &Map<String, Value>,
    ) -> Result<(Vec<Signature>, Vec<Value>), AaiError> {
        let key = &target.key;
        let explicit_types = match target.tool.signature.as_deref() {
            Some(text) => Some(split_signature(text).map_err(|e| {
                AaiError::new(
                    ErrorKind::AaiJsonInvalid,
                    format!(
                        "{}.{}: `signature` {text:?} is not a D-Bus signature: {e}",
                        key.interface, key.method
                    ),
                )
            })?),
            None => None,
        };
        let info = match &explicit_types {
            Some(types) if target.tool.args.is_some() => Arc::new(MethodInfo {
                types: types.clone(),
                names: vec![None; types.len()],
            }),
            _ => {
                let mut info = self.introspect(connection, key).await?;
                if let Some(types) = explicit_types {
                    let names = info.names.clone();
                    info = Arc::new(MethodInfo {
                        names: pad(names, types.len()),
                        types,
                    });
                }
                info
            }
        };
        let values = match &target.tool.args {
            Some(template) => template_values(template, args, target.parameters.as_ref(), key)?,
            None => named_values(&info, target.parameters.as_ref(), args, key)?,
        };
        if values.len() != info.types.len() {
            return Err(AaiError::new(
                ErrorKind::AaiJsonInvalid,
                format!(
                    "{}.{} takes {} argument(s) ({}) but the descriptor supplies {}; fix `args`/`signature` in its aai.json",
                    key.interface,
                    key.method,
                    info.types.len(),
                    join_types(&info.types),
                    values.len()
                ),
            ));
        }
        Ok((info.types.clone(), values))
    }

    async fn introspect(
        &self,
        connection: &Connection,
        key: &MethodKey,
    ) -> Result<Arc<MethodInfo>, AaiError> {
        if let Some(info) = self.methods.lock().ok().and_then(|m| m.get(key).cloned()) {
            return Ok(info);
        }
        let reply = connection
            .call_method(
                Some(key.service.as_str()),
                key.object.as_str(),
                Some("org.freedesktop.DBus.Introspectable"),
                "Introspect",
                &(),
            )
            .await
            .map_err(|error| {
                let mut aai = map_error(&error, key);
                if aai.kind == ErrorKind::AutomationFailed {
                    aai.message = format!(
                        "{}; introspection failed, so give the tool's `signature` in its aai.json",
                        aai.message
                    );
                }
                aai
            })?;
        let xml: String = reply.body().deserialize().map_err(|e| {
            AaiError::new(
                ErrorKind::AutomationFailed,
                format!("{}: unreadable introspection reply: {e}", key.service),
            )
        })?;
        let node = zbus_xml::Node::try_from(xml.as_str()).map_err(|e| {
            AaiError::new(
                ErrorKind::AutomationFailed,
                format!("{}: invalid introspection XML: {e}", key.service),
            )
        })?;
        let interface = find_named(node.interfaces(), |i| i.name().to_string(), &key.interface)
            .map_err(|names| {
                AaiError::new(
                    ErrorKind::AutomationFailed,
                    format!(
                        "{} at {} has no interface {}; it has: {}",
                        key.service,
                        key.object,
                        key.interface,
                        names.join(", ")
                    ),
                )
            })?;
        let method = find_named(interface.methods(), |m| m.name().to_string(), &key.method)
            .map_err(|names| {
                AaiError::new(
                    ErrorKind::AutomationFailed,
                    format!(
                        "{} has no method {}.{}; it has: {}",
                        key.service,
                        key.interface,
                        key.method,
                        names.join(", ")
                    ),
                )
            })?;
        let inputs = method
            .args()
            .iter()
            .filter(|a| !matches!(a.direction(), Some(zbus_xml::ArgDirection::Out)));
        let (types, names) = inputs
            .map(|a| (a.ty().inner().clone(), a.name().map(str::to_owned)))
            .unzip();
        let info = Arc::new(MethodInfo { types, names });
        if let Ok(mut methods) = self.methods.lock() {
            methods.insert(key.clone(), info.clone());
        }
        Ok(info)
    }
}

/// The item named `wanted`, or else the names there are.
fn find_named<'a, T>(
    items: &'a [T],
    name: impl Fn(&T) -> String,
    wanted: &str,
) -> Result<&'a T, Vec<String>> {
    items
        .iter()
        .find(|item| name(item) == wanted)
        .ok_or_else(|| items.iter().map(&name).collect())
}

/// Where the invoked tool's call goes.
fn target<'a>(invocation: &Invocation<'a>) -> Result<Target<'a>, AaiError> {
    let (section, tool) = crate::section_tool(
        invocation.descriptor.platforms.linux.as_ref(),
        invocation,
        aai_descriptor::Platform::Linux,
    )?;
    let fields = &section.fields;
    Ok(Target {
        key: MethodKey {
            bus: fields.bus,
            service: fields.service.clone(),
            object: tool
                .fields
                .object
                .as_deref()
                .unwrap_or(&fields.object)
                .to_owned(),
            interface: tool
                .fields
                .interface
                .as_deref()
                .unwrap_or(&fields.interface)
                .to_owned(),
            method: tool.fields.method.to_string(),
        },
        tool: &tool.fields,
        parameters: tool
            .common
            .parameters
            .as_ref()
            .map(aai_descriptor::Parameters::schema),
    })
}

fn pad(mut names: Vec<Option<String>>, len: usize) -> Vec<Option<String>> {
    names.resize(len, None);
    names
}

/// Values from the tool's `args` list: a string that is exactly `"${param}"`, at any depth,
/// takes that argument (or the parameter's `default`); everything else is a fixed value.
fn template_values(
    template: &[Value],
    args: &Map<String, Value>,
    parameters: Option<&Value>,
    key: &MethodKey,
) -> Result<Vec<Value>, AaiError> {
    template
        .iter()
        .enumerate()
        .map(|(index, item)| fill(item, args, parameters, key, index))
        .collect()
}

fn fill(
    item: &Value,
    args: &Map<String, Value>,
    parameters: Option<&Value>,
    key: &MethodKey,
    index: usize,
) -> Result<Value, AaiError> {
    match item {
        Value::String(text) => match template::whole_placeholder(text) {
            Some(name) => args
                .get(name)
                .or_else(|| parameters?.get("properties")?.get(name)?.get("default"))
                .cloned()
                .ok_or_else(|| {
                    AaiError::new(
                        ErrorKind::InvalidParams,
                        format!(
                            "{}.{} needs argument `{name}` (in-arg {index}); pass it in args",
                            key.interface, key.method
                        ),
                    )
                    .with_detail(json!({"field": name}))
                }),
            None => Ok(item.clone()),
        },
        Value::Array(items) => items
            .iter()
            .map(|i| fill(i, args, parameters, key, index))
            .collect::<Result<_, _>>()
            .map(Value::Array),
        Value::Object(map) => map
            .iter()
            .map(|(k, v)| Ok((k.clone(), fill(v, args, parameters, key, index)?)))
            .collect::<Result<Map<_, _>, AaiError>>()
            .map(Value::Object),
        other => Ok(other.clone()),
    }
}

/// Values matched to in-args by name, falling back to the order of the tool's parameters.
fn named_values(
    info: &MethodInfo,
    parameters: Option<&Value>,
    args: &Map<String, Value>,
    key: &MethodKey,
) -> Result<Vec<Value>, AaiError> {
    let declared: Vec<&String> = parameters
        .and_then(|p| p.get("properties"))
        .and_then(Value::as_object)
        .map(|props| props.keys().collect())
        .unwrap_or_default();
    info.types
        .iter()
        .enumerate()
        .map(|(index, ty)| {
            let by_name = info.names[index].as_deref().filter(|name| declared.iter().any(|d| d.as_str() == *name));
            let name = by_name.or_else(|| declared.get(index).map(|s| s.as_str()));
            // A schema `default` fills an argument left out, as it does for `args` templates.
            name.and_then(|name| {
                args.get(name)
                    .or_else(|| parameters?.get("properties")?.get(name)?.get("default"))
            })
            .cloned()
            .ok_or_else(|| {
                let shown = name.or(info.names[index].as_deref()).unwrap_or("?");
                AaiError::new(
                    ErrorKind::InvalidParams,
                    format!("{}.{} needs argument `{shown}` (in-arg {index}, D-Bus type `{ty}`); pass it in args", key.interface, key.method),
                )
                .with_detail(json!({"field": shown}))
            })
        })
        .collect()
}

fn build_body(
    types: &[Signature],
    values: &[Value],
) -> Result<Option<Structure<'static>>, AaiError> {
    if types.is_empty() {
        return Ok(None);
    }
    let mut builder = StructureBuilder::new();
    for (index, (ty, value)) in types.iter().zip(values).enumerate() {
        let converted = convert::to_dbus(value, ty, &format!("in-arg {index}"))
            .map_err(|e| AaiError::new(ErrorKind::InvalidParams, e.to_string()))?;
        builder = builder.append_field(converted);
    }
    builder.build().map(Some).map_err(|e| {
        AaiError::new(
            ErrorKind::AutomationFailed,
            format!("cannot build the D-Bus message: {e}"),
        )
    })
}

/// Why a tool's `signature` does not split into complete types.
#[derive(Debug, thiserror::Error)]
enum SplitError {
    #[error("incomplete type at byte {0}")]
    Incomplete(usize),
    #[error("{piece:?}: {reason}")]
    Invalid {
        piece: String,
        /// Not a `std::error::Error`, so not a source.
        reason: zbus::zvariant::signature::Error,
    },
}

/// Splits a signature into its complete types: `"sa{sv}i"` → `s`, `a{sv}`, `i`.
fn split_signature(text: &str) -> Result<Vec<Signature>, SplitError> {
    let bytes = text.as_bytes();
    let mut types = Vec::new();
    let mut start = 0;
    while start < bytes.len() {
        let end = complete_type_end(bytes, start).ok_or(SplitError::Incomplete(start))?;
        let piece = &text[start..end];
        types.push(
            piece
                .parse::<Signature>()
                .map_err(|reason| SplitError::Invalid {
                    piece: piece.to_owned(),
                    reason,
                })?,
        );
        start = end;
    }
    Ok(types)
}

fn complete_type_end(bytes: &[u8], start: usize) -> Option<usize> {
    match *bytes.get(start)? {
        b'a' => complete_type_end(bytes, start + 1),
        open @ (b'(' | b'{') => {
            let close = if open == b'(' { b')' } else { b'}' };
            let mut at = start + 1;
            while *bytes.get(at)? != close {
                at = complete_type_end(bytes, at)?;
            }
            Some(at + 1)
        }
        _ => Some(start + 1),
    }
}

fn join_types(types: &[Signature]) -> String {
    types
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(" ")
}

fn reply_to_json(reply: &zbus::Message) -> Result<Value, zbus::Error> {
    let body = reply.body();
    if matches!(body.signature(), Signature::Unit) {
        return Ok(Value::Null);
    }
    let structure: Structure<'_> = body.deserialize()?;
    let mut fields: Vec<Value> = structure.fields().iter().map(convert::to_json).collect();
    Ok(if fields.len() == 1 {
        fields.remove(0)
    } else {
        Value::Array(fields)
    })
}

fn parse_output(output: Value, parser: Option<&str>, key: &MethodKey) -> Result<Value, AaiError> {
    match (parser, output) {
        (Some("json"), Value::String(text)) => serde_json::from_str(&text).map_err(|e| {
            AaiError::new(
                ErrorKind::AutomationFailed,
                format!("{}.{} returned text that is not JSON ({e}), but the tool's output_parser is \"json\"", key.interface, key.method),
            )
            .with_detail(json!({"output": text}))
        }),
        (Some("string"), Value::String(text)) => Ok(Value::String(text)),
        (Some("string"), other) => Ok(Value::String(other.to_string())),
        (_, other) => Ok(other),
    }
}

fn bus_name(bus: Bus) -> &'static str {
    match bus {
        Bus::Session => "session",
        Bus::System => "system",
    }
}

fn error_name(error: &zbus::Error) -> Option<(String, String)> {
    match error {
        zbus::Error::MethodError(name, message, _) => {
            Some((name.to_string(), message.clone().unwrap_or_default()))
        }
        zbus::Error::FDO(fdo) => {
            let name = zbus::DBusError::name(fdo.as_ref()).to_string();
            Some((
                name,
                zbus::DBusError::description(fdo.as_ref())
                    .unwrap_or_default()
                    .to_owned(),
            ))
        }
        _ => None,
    }
}

fn is_signature_error(error: &zbus::Error) -> bool {
    error_name(error)
        .is_some_and(|(name, _)| name.ends_with(".InvalidArgs") || name.ends_with(".UnknownMethod"))
}

/// Maps a D-Bus failure to the AAI error an agent can act on.
fn map_error(error: &zbus::Error, key: &MethodKey) -> AaiError {
    let Some((name, message)) = error_name(error) else {
        return AaiError::new(
            ErrorKind::AutomationFailed,
            format!(
                "{}.{} on {} failed: {error}",
                key.interface, key.method, key.service
            ),
        );
    };
    let detail = json!({"dbus_error": name, "dbus_message": message});
    let short = name.rsplit('.').next().unwrap_or(&name);
    let (kind, text) = match short {
        "ServiceUnknown" | "NameHasNoOwner" | "ServiceNotFound" => (
            ErrorKind::AppNotRunning,
            format!(
                "{} is not running on the {} bus and cannot be started by D-Bus activation; start the app, then retry",
                key.service,
                bus_name(key.bus)
            ),
        ),
        _ if name.starts_with("org.freedesktop.DBus.Error.Spawn.") => (
            ErrorKind::AppNotRunning,
            format!("D-Bus could not start {}: {message}", key.service),
        ),
        "AccessDenied" | "AuthFailed" | "InteractiveAuthorizationRequired" => (
            ErrorKind::PermissionDenied,
            format!(
                "{} refused {}.{}: {message}; the bus or the app's policy does not allow this caller",
                key.service, key.interface, key.method
            ),
        ),
        "NoReply" | "Timeout" | "TimedOut" => (
            ErrorKind::Timeout,
            format!(
                "{} did not answer {}.{} in time: {message}",
                key.service, key.interface, key.method
            ),
        ),
        _ => (
            ErrorKind::AutomationFailed,
            format!(
                "{}.{} failed with {name}: {message}",
                key.interface, key.method
            ),
        ),
    };
    AaiError::new(kind, text).with_detail(detail)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_signatures_into_complete_types() {
        let types = split_signature("sa{sv}i(ai)v").expect("valid");
        let shown: Vec<String> = types.iter().map(ToString::to_string).collect();
        assert_eq!(shown, ["s", "a{sv}", "i", "(ai)", "v"]);
        assert!(split_signature("a{sv").is_err());
        assert!(split_signature("").expect("empty").is_empty());
    }
}
