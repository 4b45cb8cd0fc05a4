//! A D-Bus service's introspection → a `linux`/`dbus` draft: one tool per method (parameters
//! from the signature, named after the introspection's `arg` names), a `get_`/`set_` tool per
//! readable/writable property, documentation from the standard annotations.

use std::collections::HashSet;

use serde_json::{Map, Value, json};

use crate::{DescribeError, Draft, clean, guess_risk, tool, tool_name};

/// Interfaces every object has: skipped unless asked for.
pub const STANDARD: &[&str] = &[
    "org.freedesktop.DBus.Peer",
    "org.freedesktop.DBus.Introspectable",
    "org.freedesktop.DBus.Properties",
    "org.freedesktop.DBus.ObjectManager",
];

/// What to draft.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// The bus name (`org.freedesktop.Notifications`).
    pub service: String,
    /// `system` or `session`.
    pub system: bool,
    /// Only this interface (a standard one too, when named).
    pub interface: Option<String>,
}

/// Parsed introspection of one object.
struct Interface<'a> {
    path: &'a str,
    node: roxmltree::Node<'a, 'a>,
}

/// The child object paths an introspection names, for walking the tree.
///
/// # Errors
/// The text is not introspection XML.
pub fn children(path: &str, xml: &str) -> Result<Vec<String>, DescribeError> {
    let doc = parse(xml)?;
    let base = path.trim_end_matches('/');
    Ok(doc
        .root_element()
        .children()
        .filter(|n| n.has_tag_name("node"))
        .filter_map(|n| n.attribute("name"))
        .filter(|name| !name.is_empty() && !name.contains('/'))
        .map(|name| format!("{base}/{name}"))
        .collect())
}

fn parse(xml: &str) -> Result<roxmltree::Document<'_>, DescribeError> {
    crate::xml(xml, "D-Bus introspection")
}

/// A draft from the introspections of the service's objects (`(path, xml)`, the first being
/// the object the section points at when it has methods).
///
/// # Errors
/// An introspection is not XML, or no object has a method or property to offer.
pub fn draft(options: &Options, objects: &[(String, String)]) -> Result<Draft, DescribeError> {
    let docs: Vec<(&str, roxmltree::Document<'_>)> = objects
        .iter()
        .map(|(path, xml)| parse(xml).map(|doc| (path.as_str(), doc)))
        .collect::<Result<_, _>>()?;
    let wanted = |name: &str| match &options.interface {
        Some(only) => name == only,
        None => !STANDARD.contains(&name),
    };
    let mut interfaces: Vec<Interface<'_>> = Vec::new();
    let mut also: std::collections::BTreeMap<&str, usize> = std::collections::BTreeMap::new();
    for (path, doc) in &docs {
        for node in doc
            .root_element()
            .children()
            .filter(|n| n.has_tag_name("interface"))
        {
            let name = node.attribute("name").unwrap_or_default();
            if !wanted(name) {
                continue;
            }
            // An interface many objects offer (a device each) is drafted once.
            if interfaces
                .iter()
                .any(|i| i.node.attribute("name") == Some(name))
            {
                *also.entry(name).or_default() += 1;
            } else {
                interfaces.push(Interface { path, node });
            }
        }
    }
    // The section points at the service's own object and interface when it has them (by
    // convention `org.example.App` at `/org/example/App`).
    let conventional = format!("/{}", options.service.replace('.', "/"));
    interfaces.sort_by_key(|i| {
        (
            i.path != conventional,
            i.node.attribute("name") != Some(options.service.as_str()),
        )
    });
    let Some(first) = interfaces.first() else {
        return Err(DescribeError::Nothing(format!(
            "{}: no object of the service offers {}",
            options.service,
            options.interface.as_deref().map_or_else(
                || "an interface other than the standard ones".to_owned(),
                |i| format!("the interface {i}")
            )
        )));
    };
    let (object, interface) = (
        first.path.to_owned(),
        first.node.attribute("name").unwrap_or_default().to_owned(),
    );
    let mut taken = HashSet::new();
    let mut tools = Vec::new();
    let mut notes: Vec<String> = also
        .iter()
        .map(|(name, more)| {
            format!("{more} more objects offer {name}: the draft calls the first; set a tool's `object` for another")
        })
        .collect();
    // Names are prefixed with the interface's last word only where two interfaces meet.
    let many = interfaces
        .iter()
        .map(|i| i.node.attribute("name"))
        .collect::<HashSet<_>>()
        .len()
        > 1;
    for found in &interfaces {
        let iface = found.node.attribute("name").unwrap_or_default();
        let prefix = if many && iface != interface {
            iface.rsplit('.').next().unwrap_or_default().to_owned() + "_"
        } else {
            String::new()
        };
        let mut place = Map::new();
        if iface != interface {
            place.insert("interface".into(), json!(iface));
        }
        if found.path != object {
            place.insert("object".into(), json!(found.path));
        }
        for method in found.node.children().filter(|n| n.has_tag_name("method")) {
            let Some(name) = method.attribute("name") else {
                continue;
            };
            if deprecated(method) {
                notes.push(format!("{iface}.{name} is deprecated: left out"));
                continue;
            }
            match method_tool(iface, name, method, &prefix, &place, &mut taken) {
                Ok(tool) => tools.push(tool),
                Err(why) => notes.push(format!("{iface}.{name}: left out ({why})")),
            }
        }
        for property in found.node.children().filter(|n| n.has_tag_name("property")) {
            property_tools(
                iface, property, &prefix, found.path, &object, &mut taken, &mut tools,
            );
        }
    }
    if tools.is_empty() {
        return Err(DescribeError::Nothing(format!(
            "{}: its interfaces have no method or property the gateway can call",
            options.service
        )));
    }
    let mut section = Map::new();
    section.insert("automation".into(), json!("dbus"));
    if options.system {
        section.insert("bus".into(), json!("system"));
    }
    section.insert("service".into(), json!(options.service));
    section.insert("object".into(), json!(object));
    section.insert("interface".into(), json!(interface));
    section.insert("tools".into(), Value::Array(tools));
    let last = options
        .service
        .rsplit('.')
        .next()
        .unwrap_or(&options.service);
    let description = documentation(first.node).unwrap_or_default();
    Ok(Draft {
        descriptor: crate::descriptor(
            &crate::app_id_from(&options.service, "local.dbus.service"),
            last,
            &description,
            "linux",
            section,
            vec![format!(
                "Drafted from the introspection of {} on the {} bus: name the app and say what it is for.",
                options.service,
                if options.system { "system" } else { "session" }
            )],
        ),
        notes,
    })
}

fn deprecated(node: roxmltree::Node<'_, '_>) -> bool {
    node.children().any(|a| {
        a.has_tag_name("annotation")
            && a.attribute("name") == Some("org.freedesktop.DBus.Deprecated")
            && a.attribute("value") == Some("true")
    })
}

/// The documentation of an element: a `DocString`/`Description` annotation or a `doc:doc`
/// element (GDBus, the D-Bus documentation DTD).
fn documentation(node: roxmltree::Node<'_, '_>) -> Option<String> {
    for child in node.children() {
        if child.has_tag_name("annotation")
            && child.attribute("name").is_some_and(|n| {
                n.ends_with(".DocString")
                    || n.ends_with(".Description")
                    || n.ends_with(".DocString.Summary")
            })
            && let Some(value) = child.attribute("value")
        {
            return Some(clean(value));
        }
        if child.tag_name().name() == "doc" {
            let text: Vec<&str> = child
                .descendants()
                .filter(|d| d.is_text())
                .filter_map(|d| d.text())
                .collect();
            let text = clean(&text.join(" "));
            if !text.is_empty() {
                return Some(text);
            }
        }
    }
    None
}

fn method_tool(
    iface: &str,
    name: &str,
    method: roxmltree::Node<'_, '_>,
    prefix: &str,
    place: &Map<String, Value>,
    taken: &mut HashSet<String>,
) -> Result<Value, String> {
    let args: Vec<roxmltree::Node<'_, '_>> = method
        .children()
        .filter(|n| n.has_tag_name("arg"))
        .collect();
    let ins: Vec<_> = args
        .iter()
        .filter(|a| a.attribute("direction").is_none_or(|d| d == "in"))
        .collect();
    let outs: Vec<_> = args
        .iter()
        .filter(|a| a.attribute("direction") == Some("out"))
        .collect();
    let mut signature = String::new();
    let mut properties = Map::new();
    let mut required = Vec::new();
    let mut values = Vec::new();
    let mut used = HashSet::new();
    for (i, arg) in ins.iter().enumerate() {
        let ty = arg.attribute("type").ok_or("an argument without a type")?;
        aai_descriptor::dbus_sig::split(ty).map_err(|e| format!("argument type {ty:?}: {e}"))?;
        signature.push_str(ty);
        let raw = arg
            .attribute("name")
            .filter(|n| !n.is_empty())
            .map_or_else(|| format!("arg{i}"), str::to_owned);
        let param = tool_name(&raw, &mut used);
        let mut schema = schema_of(ty);
        if let Some(doc) = documentation(**arg) {
            schema["description"] = json!(doc);
        } else if ty == "v" {
            schema["description"] =
                json!("any value; {\"$signature\": \"d\", \"value\": 1.5} fixes its D-Bus type");
        }
        properties.insert(param.clone(), schema);
        required.push(json!(param));
        values.push(json!(format!("${{{param}}}")));
    }
    let shown: Vec<String> = ins
        .iter()
        .map(|a| {
            format!(
                "{} {}",
                a.attribute("type").unwrap_or("?"),
                a.attribute("name").unwrap_or("")
            )
            .trim()
            .to_owned()
        })
        .collect();
    let returns: Vec<String> = outs
        .iter()
        .map(|a| {
            a.attribute("name").map_or_else(
                || a.attribute("type").unwrap_or("?").to_owned(),
                str::to_owned,
            )
        })
        .collect();
    let fallback = format!(
        "Calls {iface}.{name}({}){}",
        shown.join(", "),
        if returns.is_empty() {
            String::new()
        } else {
            format!(" → {}", returns.join(", "))
        }
    );
    let mut fields = Map::new();
    fields.insert("method".into(), json!(name));
    fields.extend(place.clone());
    let parameters = if properties.is_empty() {
        None
    } else {
        fields.insert("signature".into(), json!(signature));
        fields.insert("args".into(), Value::Array(values));
        Some(json!({"type": "object", "properties": properties, "required": required}))
    };
    let mut described = documentation(method);
    if let (Some(doc), false) = (&mut described, returns.is_empty()) {
        doc.push_str(&format!(" Returns {}.", returns.join(", ")));
    }
    let tool_name = tool_name(&format!("{prefix}{name}"), taken);
    Ok(tool(
        &tool_name,
        described.as_deref(),
        &fallback,
        parameters,
        guess_risk(name, None),
        fields,
    ))
}

fn property_tools(
    iface: &str,
    property: roxmltree::Node<'_, '_>,
    prefix: &str,
    path: &str,
    object: &str,
    taken: &mut HashSet<String>,
    tools: &mut Vec<Value>,
) {
    let (Some(name), Some(ty)) = (property.attribute("name"), property.attribute("type")) else {
        return;
    };
    if aai_descriptor::dbus_sig::split(ty).is_err() {
        return;
    }
    let access = property.attribute("access").unwrap_or("read");
    let doc = documentation(property);
    let mut place = Map::new();
    place.insert("interface".into(), json!("org.freedesktop.DBus.Properties"));
    if path != object {
        place.insert("object".into(), json!(path));
    }
    if access.contains("read") {
        let mut fields = place.clone();
        fields.insert("method".into(), json!("Get"));
        fields.insert("signature".into(), json!("ss"));
        fields.insert("args".into(), json!([iface, name]));
        let described = doc.as_ref().map(|d| format!("{d} (read)"));
        tools.push(tool(
            &tool_name(&format!("{prefix}get_{name}"), taken),
            described.as_deref(),
            &format!("Reads the property {iface}.{name} ({ty})"),
            None,
            ("low", true, false),
            fields,
        ));
    }
    if access.contains("write") {
        let mut fields = place;
        fields.insert("method".into(), json!("Set"));
        fields.insert("signature".into(), json!("ssv"));
        fields.insert(
            "args".into(),
            json!([iface, name, {"$signature": ty, "value": "${value}"}]),
        );
        let described = doc.as_ref().map(|d| format!("{d} (set)"));
        tools.push(tool(
            &tool_name(&format!("{prefix}set_{name}"), taken),
            described.as_deref(),
            &format!("Sets the property {iface}.{name} ({ty})"),
            Some(json!({"type": "object", "properties": {"value": schema_of(ty)}, "required": ["value"]})),
            ("medium", false, false),
            fields,
        ));
    }
}

/// The JSON Schema of a D-Bus complete type.
pub fn schema_of(ty: &str) -> Value {
    let bytes = ty.as_bytes();
    match bytes.first() {
        Some(b's' | b'o' | b'g') => json!({"type": "string"}),
        Some(b'b') => json!({"type": "boolean"}),
        Some(b'y') => json!({"type": "integer", "minimum": 0, "maximum": 255}),
        Some(b'q' | b'u' | b't') => json!({"type": "integer", "minimum": 0}),
        Some(b'n' | b'i' | b'x' | b'h') => json!({"type": "integer"}),
        Some(b'd') => json!({"type": "number"}),
        Some(b'a') if bytes.get(1) == Some(&b'{') => {
            let inner = &ty[2..ty.len() - 1];
            let value = aai_descriptor::dbus_sig::split(inner)
                .ok()
                .and_then(|parts| parts.get(1).cloned())
                .unwrap_or_default();
            json!({"type": "object", "additionalProperties": schema_of(&value)})
        }
        Some(b'a') => json!({"type": "array", "items": schema_of(&ty[1..])}),
        Some(b'(') => {
            let fields = aai_descriptor::dbus_sig::split(&ty[1..ty.len() - 1]).unwrap_or_default();
            json!({"type": "array", "prefixItems": fields.iter().map(|f| schema_of(f)).collect::<Vec<_>>(),
                   "minItems": fields.len(), "maxItems": fields.len()})
        }
        _ => json!({}),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOTIFICATIONS: &str = r#"<!DOCTYPE node PUBLIC "-//freedesktop//DTD D-BUS Object Introspection 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/introspect.dtd">
<node>
  <interface name="org.freedesktop.DBus.Introspectable"><method name="Introspect"><arg name="xml" type="s" direction="out"/></method></interface>
  <interface name="org.freedesktop.Notifications">
    <method name="GetCapabilities"><arg name="capabilities" type="as" direction="out"/></method>
    <method name="Notify">
      <arg name="app_name" type="s" direction="in"/><arg name="replaces_id" type="u" direction="in"/>
      <arg name="app_icon" type="s" direction="in"/><arg name="summary" type="s" direction="in"/>
      <arg name="body" type="s" direction="in"/><arg name="actions" type="as" direction="in"/>
      <arg name="hints" type="a{sv}" direction="in"/><arg name="expire_timeout" type="i" direction="in"/>
      <arg name="id" type="u" direction="out"/>
      <annotation name="org.gtk.GDBus.DocString" value="Shows a notification."/>
    </method>
    <method name="CloseNotification"><arg name="id" type="u" direction="in"/></method>
    <method name="Old"><annotation name="org.freedesktop.DBus.Deprecated" value="true"/></method>
    <property name="Paused" type="b" access="readwrite"/>
    <signal name="NotificationClosed"><arg name="id" type="u"/><arg name="reason" type="u"/></signal>
  </interface>
  <node name="child"/>
</node>"#;

    #[test]
    fn methods_and_properties_become_tools_that_validate() {
        let options = Options {
            service: "org.freedesktop.Notifications".into(),
            ..Options::default()
        };
        let draft = draft(
            &options,
            &[(
                "/org/freedesktop/Notifications".into(),
                NOTIFICATIONS.into(),
            )],
        )
        .expect("draft");
        crate::assert_validates(&draft);
        let names: Vec<&str> = draft
            .tools()
            .iter()
            .map(|t| t["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            names,
            [
                "get_capabilities",
                "notify",
                "close_notification",
                "get_paused",
                "set_paused"
            ]
        );
        let notify = &draft.tools()[1];
        assert_eq!(notify["signature"], "susssasa{sv}i");
        assert_eq!(notify["args"][0], "${app_name}");
        assert_eq!(
            notify["parameters"]["properties"]["hints"]["type"],
            "object"
        );
        assert_eq!(notify["description"], "Shows a notification. Returns id.");
        assert!(notify.get("todo").is_none());
        assert_eq!(draft.tools()[0]["risk"], "low");
        // CloseNotification: what closes is guessed high, as quit and delete are.
        assert_eq!(draft.tools()[2]["risk"], "high");
        assert!(draft.tools()[0]["todo"].is_string(), "no doc: a todo");
        assert!(draft.notes.iter().any(|n| n.contains("Old is deprecated")));
        assert_eq!(
            children("/org/freedesktop/Notifications", NOTIFICATIONS).unwrap(),
            ["/org/freedesktop/Notifications/child"]
        );
    }

    #[test]
    fn the_standard_interfaces_only_when_asked() {
        let options = Options {
            service: "org.example.X".into(),
            interface: Some("org.freedesktop.DBus.Introspectable".into()),
            ..Options::default()
        };
        let draft = draft(&options, &[("/".into(), NOTIFICATIONS.into())]).expect("draft");
        assert_eq!(draft.tools().len(), 1);
        let none = Options {
            service: "org.example.X".into(),
            interface: Some("org.nothing".into()),
            ..Options::default()
        };
        assert!(super::draft(&none, &[("/".into(), NOTIFICATIONS.into())]).is_err());
    }

    #[test]
    fn types_become_schemas() {
        assert_eq!(schema_of("a{sv}")["additionalProperties"], json!({}));
        assert_eq!(
            schema_of("a(is)")["items"]["prefixItems"][1]["type"],
            "string"
        );
        assert_eq!(schema_of("ay")["items"]["maximum"], 255);
    }
}
