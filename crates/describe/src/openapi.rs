//! An OpenAPI document (3.0, 3.1, or Swagger 2.0) → a `web`/`restapi` draft: one tool per
//! operation, its path, query and header parameters and its JSON body as one schema with the
//! document's `$ref`s resolved, the first server as the base URL, the security scheme as the
//! gateway's `auth` (never a secret: a variable to set, a client id to fill in).

use std::collections::{BTreeMap, HashSet};

use serde_json::{Map, Value, json};

use crate::refs::{MOST_NODES, Resolver};
use crate::secrets::scrub;
use crate::{DescribeError, Draft, clean, first_sentence, guess_risk, tool, tool_name};

/// Which operations to draft.
#[derive(Debug, Clone)]
pub struct Options {
    /// Only operations with one of these tags (none: all).
    pub tags: Vec<String>,
    /// Only operations whose id, path or summary contains one of these (case-insensitive).
    pub include: Vec<String>,
    /// At most this many tools; the rest are named in the notes.
    pub max_tools: usize,
    /// Where the document came from, for a relative server URL.
    pub source_url: Option<String>,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            tags: Vec::new(),
            include: Vec::new(),
            max_tools: 60,
            source_url: None,
        }
    }
}

/// The methods a web tool sends (`OPTIONS` asks about an API rather than using it).
const METHODS: &[&str] = &["get", "put", "post", "delete", "patch", "head"];

/// A draft from an OpenAPI document.
///
/// # Errors
/// The document is neither OpenAPI 3 nor Swagger 2.0, or no operation is left to offer.
pub fn draft(doc: &Value, options: &Options) -> Result<Draft, DescribeError> {
    let swagger = doc["swagger"].as_str().is_some_and(|v| v.starts_with('2'));
    if !swagger && !doc["openapi"].as_str().is_some_and(|v| v.starts_with('3')) {
        return Err(DescribeError::Unreadable {
            what: "OpenAPI document",
            why: "it has neither `openapi: 3.x` nor `swagger: 2.0`".into(),
        });
    }
    let mut notes = Vec::new();
    let mut todo = Vec::new();
    let base_url = base_url(doc, swagger, options, &mut todo);
    let (auth, schemes_note) = auth_of(doc, swagger, &app_words(doc, &base_url));
    todo.extend(schemes_note);
    let resolver = Resolver {
        doc,
        budget: std::cell::Cell::new(MOST_NODES),
    };
    let mut chosen = Vec::new();
    let mut skipped_filter = 0usize;
    for (path, item) in doc["paths"].as_object().into_iter().flatten() {
        for method in METHODS {
            let Some(op) = item.get(*method).filter(|o| o.is_object()) else {
                continue;
            };
            if !wanted(op, path, options) {
                skipped_filter += 1;
                continue;
            }
            chosen.push((path.as_str(), *method, item, op));
        }
    }
    let mut left_out: BTreeMap<String, usize> = BTreeMap::new();
    if chosen.len() > options.max_tools {
        for (_, _, _, op) in &chosen[options.max_tools..] {
            let tag = op["tags"][0].as_str().unwrap_or("(untagged)").to_owned();
            *left_out.entry(tag).or_default() += 1;
        }
        chosen.truncate(options.max_tools);
    }
    let mut taken = HashSet::new();
    let mut tools = Vec::new();
    for (path, method, item, op) in chosen {
        match operation(&resolver, swagger, path, method, item, op, &mut taken) {
            Ok(tool) => tools.push(tool),
            Err(why) => notes.push(format!(
                "{} {path}: left out ({why})",
                method.to_uppercase()
            )),
        }
    }
    if skipped_filter > 0 {
        notes.push(format!(
            "{skipped_filter} operations did not match --tag/--include"
        ));
    }
    if !left_out.is_empty() {
        let total: usize = left_out.values().sum();
        let by_tag: Vec<String> = left_out.iter().map(|(t, n)| format!("{t} ({n})")).collect();
        let line = format!(
            "{total} more operations were left out past {} tools, by tag: {}. Draft them with --tag or --include.",
            options.max_tools,
            by_tag.join(", ")
        );
        notes.push(line.clone());
        todo.push(line);
    }
    let mut section = Map::new();
    section.insert("automation".into(), json!("restapi"));
    section.insert("base_url".into(), json!(base_url));
    if let Some(auth) = auth {
        section.insert("auth".into(), auth);
    }
    section.insert("tools".into(), Value::Array(tools));
    let title = doc["info"]["title"]
        .as_str()
        .map(clean)
        .filter(|t| !t.is_empty())
        .unwrap_or_else(|| "API".into());
    let description = doc["info"]["description"]
        .as_str()
        .map(first_sentence)
        .unwrap_or_default();
    let app_id = crate::app_id_from(&reversed_host(&base_url), "local.drafted.api");
    let mut draft = Draft {
        descriptor: crate::descriptor(&app_id, &title, &description, "web", section, todo),
        notes,
    };
    prune_invalid(&mut draft);
    if draft.tools().is_empty() {
        return Err(DescribeError::Nothing(format!(
            "no operation became a tool: {}",
            if draft.notes.is_empty() {
                "the document has no operations".to_owned()
            } else {
                draft.notes.join("; ")
            }
        )));
    }
    Ok(draft)
}

/// Drops the tools `validate` refuses (a schema it cannot compile, a template it cannot
/// fill) and says why in the notes; the rest pass as they are.
fn prune_invalid(draft: &mut Draft) {
    for _ in 0..200 {
        let text = draft.descriptor.to_string();
        let problems = match aai_descriptor::parse("draft", text.as_bytes()) {
            Ok(_) => return,
            Err(error) => error.problems,
        };
        let mut bad: Vec<usize> = problems
            .iter()
            .filter_map(|p| {
                let rest = p.pointer.strip_prefix("/platforms/web/tools/")?;
                rest.split('/').next()?.parse().ok()
            })
            .collect();
        if bad.is_empty() {
            let said: Vec<String> = problems
                .iter()
                .map(|p| format!("{}: {}", p.pointer, p.message))
                .collect();
            draft
                .notes
                .push(format!("the draft does not validate: {}", said.join("; ")));
            return;
        }
        bad.sort_unstable();
        bad.dedup();
        let Some(tools) = draft.descriptor["platforms"]["web"]["tools"].as_array_mut() else {
            return;
        };
        for index in bad.into_iter().rev() {
            if index < tools.len() {
                let removed = tools.remove(index);
                let why: Vec<&str> = problems
                    .iter()
                    .filter(|p| {
                        p.pointer
                            .starts_with(&format!("/platforms/web/tools/{index}"))
                    })
                    .map(|p| p.message.as_str())
                    .collect();
                draft.notes.push(format!(
                    "{}: left out ({})",
                    removed["name"].as_str().unwrap_or("?"),
                    why.join("; ")
                ));
            }
        }
    }
}

fn wanted(op: &Value, path: &str, options: &Options) -> bool {
    let tagged = options.tags.is_empty()
        || op["tags"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .any(|t| options.tags.iter().any(|w| w.eq_ignore_ascii_case(t)));
    let matched = options.include.is_empty() || {
        let hay = format!(
            "{} {path} {}",
            op["operationId"].as_str().unwrap_or_default(),
            op["summary"].as_str().unwrap_or_default()
        )
        .to_lowercase();
        options
            .include
            .iter()
            .any(|p| hay.contains(&p.to_lowercase()))
    };
    tagged && matched
}

/// The first server's URL, its variables filled with their defaults; relative to the
/// document's own URL when it is relative.
fn base_url(doc: &Value, swagger: bool, options: &Options, todo: &mut Vec<String>) -> String {
    let raw = if swagger {
        let scheme = doc["schemes"].as_array().and_then(|s| {
            s.iter()
                .filter_map(Value::as_str)
                .find(|s| *s == "https")
                .or_else(|| s.iter().filter_map(Value::as_str).next())
        });
        let host = doc["host"].as_str().unwrap_or_default();
        let base = doc["basePath"].as_str().unwrap_or_default();
        if host.is_empty() {
            base.to_owned()
        } else {
            format!("{}://{host}{base}", scheme.unwrap_or("https"))
        }
    } else {
        let servers = doc["servers"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default();
        let server = servers
            .iter()
            .find(|s| s["url"].as_str().is_some_and(|u| u.starts_with("https://")))
            .or_else(|| servers.first())
            .unwrap_or(&Value::Null);
        let mut url = server["url"].as_str().unwrap_or_default().to_owned();
        for (name, var) in server["variables"].as_object().into_iter().flatten() {
            let value = var["default"]
                .as_str()
                .or_else(|| var["enum"][0].as_str())
                .unwrap_or_default();
            url = url.replace(&format!("{{{name}}}"), value);
        }
        url
    };
    let raw = raw.trim_end_matches('/').to_owned();
    if let Some(rest) = raw.strip_prefix("http://") {
        if matches!(host_of(&raw), "127.0.0.1" | "localhost" | "[::1]") {
            return raw;
        }
        todo.push(format!("The document names only plain http ({raw}); the gateway speaks https to other hosts: check that the API answers there."));
        return format!("https://{rest}");
    }
    if raw.starts_with("https://") {
        return raw;
    }
    if let Some(source) = options.source_url.as_deref()
        && let Some(origin) = origin(source)
    {
        return format!(
            "{origin}{}",
            if raw.starts_with('/') {
                raw
            } else {
                format!("/{raw}")
            }
        );
    }
    todo.push(
        "The document names no absolute server URL: set `base_url` to the API's address.".into(),
    );
    format!(
        "https://api.example.com{}",
        if raw.is_empty() || raw.starts_with('/') {
            raw
        } else {
            format!("/{raw}")
        }
    )
}

fn origin(url: &str) -> Option<String> {
    let (scheme, rest) = url.split_once("://")?;
    let host = rest.split('/').next()?;
    Some(format!("{scheme}://{host}"))
}

/// The host of a URL (`https://api.github.com:443/v3` → `api.github.com`).
fn host_of(url: &str) -> &str {
    url.split_once("://")
        .map_or("", |(_, rest)| rest)
        .split(['/', ':'])
        .next()
        .unwrap_or_default()
}

fn reversed_host(base_url: &str) -> String {
    host_of(base_url)
        .split('.')
        .rev()
        .collect::<Vec<_>>()
        .join(".")
}

/// Upper-case words for variable names: `GITHUB` from the title or host.
fn app_words(doc: &Value, base_url: &str) -> String {
    // The host's first label that names something: `api.github.com` → GITHUB.
    let labels: Vec<&str> = host_of(base_url).split('.').collect();
    let word = labels[..labels.len().saturating_sub(1)]
        .iter()
        .find(|l| {
            !matches!(**l, "api" | "www" | "rest" | "gateway" | "app")
                && l.starts_with(|c: char| c.is_ascii_alphabetic())
        })
        .map(|l| (*l).to_owned())
        .unwrap_or_else(|| doc["info"]["title"].as_str().unwrap_or("API").to_owned());
    let word: String = word
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_uppercase()
            } else {
                '_'
            }
        })
        .collect();
    if word.is_empty() { "API".into() } else { word }
}

/// The gateway's `auth` for the document's security scheme (the one required first), and a
/// note for the reviewer.
fn auth_of(doc: &Value, swagger: bool, word: &str) -> (Option<Value>, Option<String>) {
    let schemes = if swagger {
        &doc["securityDefinitions"]
    } else {
        &doc["components"]["securitySchemes"]
    };
    let Some(schemes) = schemes.as_object().filter(|s| !s.is_empty()) else {
        return (
            None,
            Some("The document declares no security scheme: if the API wants a key or a token, add an `auth` (bearer or api_key with an `env_var`).".into()),
        );
    };
    let required = doc["security"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_object)
        .flat_map(|r| r.keys())
        .next();
    let mut order: Vec<&String> = required.into_iter().collect();
    order.extend(schemes.keys());
    for key in order {
        let Some(scheme) = schemes.get(key) else {
            continue;
        };
        let kind = scheme["type"].as_str().unwrap_or_default();
        match kind {
            "apiKey" if matches!(scheme["in"].as_str(), Some("header" | "query")) => {
                return (
                    Some(
                        json!({"type": "api_key", "key_placement": scheme["in"], "key_name": scheme["name"], "env_var": format!("{word}_API_KEY")}),
                    ),
                    Some(format!(
                        "The API key is read from {word}_API_KEY (or `aai-gateway auth set APP`)."
                    )),
                );
            }
            "http"
                if scheme["scheme"]
                    .as_str()
                    .is_some_and(|s| s.eq_ignore_ascii_case("bearer")) =>
            {
                return (
                    Some(json!({"type": "bearer", "env_var": format!("{word}_TOKEN")})),
                    Some(format!(
                        "The token is read from {word}_TOKEN (or `aai-gateway auth set APP`)."
                    )),
                );
            }
            "oauth2" => {
                let flow = if swagger {
                    Some(scheme)
                } else {
                    scheme["flows"]["authorizationCode"]
                        .as_object()
                        .map(|_| &scheme["flows"]["authorizationCode"])
                };
                let Some(flow) = flow else { continue };
                let (auth_url, token_url) =
                    (flow["authorizationUrl"].as_str(), flow["tokenUrl"].as_str());
                let (Some(auth_url), Some(token_url)) = (auth_url, token_url) else {
                    continue;
                };
                let scopes: Vec<&String> = flow["scopes"]
                    .as_object()
                    .map(|s| s.keys().collect())
                    .unwrap_or_default();
                return (
                    Some(json!({"type": "oauth2", "auth_url": auth_url, "token_url": token_url, "client_id": "FILL-IN-YOUR-CLIENT-ID", "scopes": scopes})),
                    Some("OAuth: register this gateway with the API (redirect URI http://127.0.0.1) and put its client id in `auth.client_id`; trim the scopes to what you need.".into()),
                );
            }
            _ => {}
        }
    }
    (None, Some("The document's security schemes (e.g. HTTP basic, OpenID Connect) have no `auth` the gateway can send: set one, or use a token.".into()))
}

/// A parameter name the templates take: snake case, starting with a letter.
fn param_name(raw: &str, used: &mut HashSet<String>) -> String {
    let name = tool_name(raw, &mut HashSet::new());
    let name = if name.starts_with(|c: char| c.is_ascii_digit()) {
        format!("p_{name}")
    } else {
        name
    };
    let mut unique = name.clone();
    let mut n = 2;
    while !used.insert(unique.clone()) {
        unique = format!("{name}_{n}");
        n += 1;
    }
    unique
}

#[allow(clippy::too_many_arguments)]
fn operation(
    resolver: &Resolver<'_>,
    swagger: bool,
    path: &str,
    method: &str,
    item: &Value,
    op: &Value,
    taken: &mut HashSet<String>,
) -> Result<Value, String> {
    resolver.budget.set(MOST_NODES);
    let raw_name = op["operationId"].as_str().map_or_else(
        || format!("{method} {}", path.replace(['{', '}'], "")),
        str::to_owned,
    );
    let name = tool_name(&raw_name, taken);
    let mut properties = Map::new();
    let mut required = Vec::new();
    let mut used = HashSet::new();
    let mut endpoint = path.to_owned();
    let mut query = Map::new();
    let mut headers = Map::new();
    let mut body: Option<Value> = None;
    let mut form = false;
    // Path-level parameters, then the operation's (which override them by name and place).
    let mut params: Vec<&Value> = Vec::new();
    for list in [&item["parameters"], &op["parameters"]] {
        for p in list.as_array().into_iter().flatten() {
            let p = resolver.follow(p);
            params.retain(|q| !(q["name"] == p["name"] && q["in"] == p["in"]));
            params.push(p);
        }
    }
    for p in params {
        let (Some(raw), Some(place)) = (p["name"].as_str(), p["in"].as_str()) else {
            continue;
        };
        let mut schema = if swagger && place != "body" {
            let mut s = p.clone();
            for k in [
                "name",
                "in",
                "required",
                "description",
                "collectionFormat",
                "allowEmptyValue",
            ] {
                s.as_object_mut().map(|o| o.remove(k));
            }
            resolver.schema(&s, 1, &mut Vec::new())
        } else {
            resolver.schema(&p["schema"], 1, &mut Vec::new())
        };
        if let (Some(d), Some(o)) = (p["description"].as_str(), schema.as_object_mut()) {
            o.insert("description".into(), json!(first_sentence(d)));
        }
        let needed = p["required"].as_bool().unwrap_or(place == "path");
        // A security scheme's own header or query parameter is sent by `auth`: no parameter,
        // and never its default or example.
        if matches!(place, "header" | "query") && resolver.is_key_param(raw, place) {
            continue;
        }
        scrub(&mut schema, raw);
        match place {
            "body" => {
                body_params(
                    &schema,
                    needed,
                    &mut properties,
                    &mut required,
                    &mut used,
                    &mut body,
                );
                continue;
            }
            "formData" => {
                form = true;
                let param = param_name(raw, &mut used);
                body.get_or_insert_with(|| json!({}))[raw] = json!(format!("${{{param}}}"));
                if needed {
                    required.push(json!(param));
                }
                properties.insert(param, schema);
                continue;
            }
            "cookie" => return Err("a cookie parameter, which the gateway does not send".into()),
            _ => {}
        }
        let param = param_name(raw, &mut used);
        let value = json!(format!("${{{param}}}"));
        match place {
            "path" => endpoint = endpoint.replace(&format!("{{{raw}}}"), &format!("${{{param}}}")),
            "query" => {
                query.insert(raw.to_owned(), value);
            }
            "header" => {
                if raw.eq_ignore_ascii_case("authorization") {
                    continue;
                }
                headers.insert(raw.to_owned(), value);
            }
            _ => continue,
        }
        if needed || place == "path" {
            required.push(json!(param));
        }
        properties.insert(param, schema);
    }
    if !swagger && let Some(request) = op.get("requestBody") {
        let request = resolver.follow(request);
        let content = request["content"].as_object();
        let json_body =
            content.and_then(|c| c.iter().find(|(k, _)| k.contains("json")).map(|(_, v)| v));
        let form_body = content.and_then(|c| c.get("application/x-www-form-urlencoded"));
        match (json_body, form_body) {
            (Some(media), _) | (None, Some(media)) => {
                form = json_body.is_none();
                let mut schema = resolver.schema(&media["schema"], 1, &mut Vec::new());
                scrub(&mut schema, "");
                let needed = request["required"].as_bool().unwrap_or(false);
                body_params(
                    &schema,
                    needed,
                    &mut properties,
                    &mut required,
                    &mut used,
                    &mut body,
                );
            }
            (None, None) if content.is_some_and(|c| !c.is_empty()) => {
                return Err(format!(
                    "its body is {}, not JSON or a form",
                    content
                        .map(|c| c.keys().cloned().collect::<Vec<_>>().join(", "))
                        .unwrap_or_default()
                ));
            }
            _ => {}
        }
    }
    // A placeholder the document declares no parameter for is a required text parameter.
    while let Some(start) = endpoint
        .char_indices()
        .find(|&(i, c)| c == '{' && !endpoint[..i].ends_with('$'))
        .map(|(i, _)| i)
    {
        let Some(len) = endpoint[start..].find('}') else {
            return Err("an unclosed path placeholder".into());
        };
        let raw = endpoint[start + 1..start + len].to_owned();
        let param = param_name(&raw, &mut used);
        endpoint.replace_range(start..=start + len, &format!("${{{param}}}"));
        properties.insert(param.clone(), json!({"type": "string"}));
        required.push(json!(param));
    }
    let upper = method.to_uppercase();
    let mut fields = Map::new();
    fields.insert("endpoint".into(), json!(endpoint));
    if upper != "GET" {
        fields.insert("method".into(), json!(upper));
    }
    if !query.is_empty() {
        fields.insert("query_params".into(), Value::Object(query));
    }
    if !headers.is_empty() {
        fields.insert("headers".into(), Value::Object(headers));
    }
    if let Some(body) = body {
        if form {
            fields.insert("body_type".into(), json!("form"));
        }
        fields.insert("body".into(), body);
    }
    let parameters = (!properties.is_empty()).then(|| {
        let mut schema = json!({"type": "object", "properties": properties});
        if !required.is_empty() {
            schema["required"] = Value::Array(required);
        }
        schema
    });
    let summary = op["summary"]
        .as_str()
        .or_else(|| op["description"].as_str())
        .map(first_sentence);
    let fallback = format!("{upper} {path}");
    Ok(tool(
        &name,
        summary.as_deref(),
        &fallback,
        parameters,
        guess_risk(&raw_name, Some(&upper)),
        fields,
    ))
}

/// A request body: an object's top-level properties become parameters of their own; anything
/// else is one parameter, `body`.
fn body_params(
    schema: &Value,
    needed: bool,
    properties: &mut Map<String, Value>,
    required: &mut Vec<Value>,
    used: &mut HashSet<String>,
    body: &mut Option<Value>,
) {
    let fields = schema["properties"].as_object().filter(|p| !p.is_empty());
    match fields {
        Some(fields) => {
            let inner: Vec<&str> = schema["required"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            let out = body.get_or_insert_with(|| json!({}));
            for (raw, field) in fields {
                if field["readOnly"] == json!(true) {
                    continue;
                }
                let param = param_name(raw, used);
                out[raw.as_str()] = json!(format!("${{{param}}}"));
                if needed && inner.contains(&raw.as_str()) {
                    required.push(json!(param));
                }
                properties.insert(param, field.clone());
            }
        }
        None => {
            let param = param_name("body", used);
            *body = Some(json!(format!("${{{param}}}")));
            if needed {
                required.push(json!(param));
            }
            properties.insert(param, schema.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn petstore3() -> Value {
        json!({
            "openapi": "3.0.3",
            "info": {"title": "Swagger Petstore", "description": "A sample pet store. More text.", "version": "1"},
            "servers": [{"url": "https://{region}.petstore.example.com/v3", "variables": {"region": {"default": "eu"}}}],
            "security": [{"petstore_auth": ["read:pets"]}],
            "components": {
                "securitySchemes": {"petstore_auth": {"type": "oauth2", "flows": {"authorizationCode": {
                    "authorizationUrl": "https://petstore.example.com/oauth/authorize",
                    "tokenUrl": "https://petstore.example.com/oauth/token",
                    "scopes": {"read:pets": "read", "write:pets": "write"}}}}},
                "schemas": {
                    "Pet": {"type": "object", "required": ["name"], "properties": {
                        "id": {"type": "integer", "readOnly": true},
                        "name": {"type": "string", "example": "doggie"},
                        "age": {"type": "integer", "minimum": 0, "exclusiveMinimum": true},
                        "parent": {"$ref": "#/components/schemas/Pet"},
                        "tag": {"type": "string", "nullable": true},
                        "misc": null}},
                },
                "parameters": {"PetId": {"name": "petId", "in": "path", "required": true, "schema": {"type": "integer"}}}
            },
            "paths": {
                "/pet": {"post": {"operationId": "addPet", "summary": "Add a new pet to the store", "tags": ["pet"],
                    "requestBody": {"required": true, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Pet"}}}}}},
                "/pet/{petId}": {
                    "parameters": [{"$ref": "#/components/parameters/PetId"}],
                    "get": {"operationId": "getPetById", "tags": ["pet"], "parameters": [{"name": "X-Trace", "in": "header", "schema": {"type": "string"}}]},
                    "delete": {"operationId": "deletePet", "summary": "Deletes a pet", "tags": ["pet"]},
                    "options": {"operationId": "petOptions", "tags": ["pet"]}},
                "/store/inventory": {"get": {"summary": "Returns pet inventories by status", "tags": ["store"],
                    "parameters": [{"name": "status", "in": "query", "schema": {"type": "array", "items": {"type": "string", "enum": []}}}]}},
                "/upload": {"post": {"operationId": "upload", "tags": ["pet"], "requestBody": {"content": {"image/png": {"schema": {"type": "string"}}}}}}
            }
        })
    }

    #[test]
    fn no_default_or_example_that_is_a_credential_reaches_a_draft() {
        let doc = json!({
            "openapi": "3.0.0", "info": {"title": "Keys", "version": "1"},
            "servers": [{"url": "https://keys.example.com"}],
            "components": {"securitySchemes": {"k": {"type": "apiKey", "in": "header", "name": "X-API-Key"},
                                               "q": {"type": "apiKey", "in": "query", "name": "api_key"}}},
            "security": [{"k": []}],
            "paths": {"/things": {"post": {
                "operationId": "makeThing",
                "parameters": [
                    {"name": "X-API-Key", "in": "header", "schema": {"type": "string", "default": "sk-live-header-secret"}, "example": "sk-live-header-example"},
                    {"name": "api_key", "in": "query", "schema": {"type": "string", "default": "sk-live-query-secret"}},
                    {"name": "access_token", "in": "query", "schema": {"type": "string", "default": "tok-default-secret"}},
                    {"name": "clientSecret", "in": "header", "schema": {"type": "string", "default": "client-secret-default"}},
                    {"name": "limit", "in": "query", "schema": {"type": "integer", "default": 10}}
                ],
                "requestBody": {"content": {"application/json": {"schema": {"type": "object", "properties": {
                    "name": {"type": "string", "default": "a thing"},
                    "password": {"type": "string", "default": "hunter2-default"},
                    "hook": {"type": "object", "properties": {"signing_secret": {"type": "string", "default": "whsec-default"}}},
                    "pin": {"type": "string", "writeOnly": true, "default": "4321-default"},
                    "code": {"type": "string", "format": "password", "default": "fmt-password-default"}
                }}}}}
            }}}
        });
        let drafted = draft(&doc, &Options::default()).expect("draft");
        let text = drafted.descriptor.to_string();
        for secret in [
            "sk-live",
            "tok-default",
            "client-secret-default",
            "hunter2",
            "whsec",
            "4321",
            "fmt-password",
        ] {
            assert!(!text.contains(secret), "{secret} reached the draft: {text}");
        }
        let tool = &drafted.descriptor["platforms"]["web"]["tools"][0];
        let properties = &tool["parameters"]["properties"];
        // The key's own parameters are left to `auth`; others keep their plain defaults.
        assert!(
            properties.get("x_api_key").is_none() && properties.get("api_key").is_none(),
            "{tool}"
        );
        assert_eq!(properties["limit"]["default"], 10);
        assert_eq!(properties["name"]["default"], "a thing");
        assert!(properties.get("access_token").is_some(), "{tool}");
    }

    #[test]
    fn operations_become_tools_with_their_parameters_auth_and_base_url() {
        let draft = draft(&petstore3(), &Options::default()).expect("draft");
        crate::assert_validates(&draft);
        let web = &draft.descriptor["platforms"]["web"];
        assert_eq!(web["base_url"], "https://eu.petstore.example.com/v3");
        assert_eq!(draft.descriptor["appId"], "com.example.petstore.eu");
        assert_eq!(web["auth"]["type"], "oauth2");
        assert_eq!(
            web["auth"]["token_url"],
            "https://petstore.example.com/oauth/token"
        );
        assert_eq!(web["auth"]["scopes"], json!(["read:pets", "write:pets"]));
        let names: Vec<&str> = draft
            .tools()
            .iter()
            .map(|t| t["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            names,
            [
                "add_pet",
                "get_pet_by_id",
                "delete_pet",
                "get_store_inventory"
            ]
        );
        let add = &draft.tools()[0];
        assert_eq!(add["method"], "POST");
        assert_eq!(
            add["body"],
            json!({"name": "${name}", "age": "${age}", "parent": "${parent}", "tag": "${tag}", "misc": "${misc}"})
        );
        assert_eq!(add["parameters"]["properties"]["misc"], json!({}));
        assert_eq!(add["parameters"]["required"], json!(["name"]));
        assert_eq!(
            add["parameters"]["properties"]["age"]["exclusiveMinimum"],
            0
        );
        assert_eq!(
            add["parameters"]["properties"]["tag"]["type"],
            json!(["string", "null"])
        );
        assert!(
            add["parameters"]["properties"]["name"]
                .get("example")
                .is_none()
        );
        assert_eq!(add["risk"], "medium");
        let get = &draft.tools()[1];
        assert_eq!(get["endpoint"], "/pet/${pet_id}");
        assert_eq!(get["headers"], json!({"X-Trace": "${x_trace}"}));
        assert_eq!(
            (get["risk"].as_str(), get["readOnly"].as_bool()),
            (Some("low"), Some(true))
        );
        assert!(get["todo"].is_string(), "no summary: a todo");
        assert_eq!(
            (
                draft.tools()[2]["risk"].as_str(),
                draft.tools()[2]["destructive"].as_bool()
            ),
            (Some("high"), Some(true))
        );
        assert_eq!(
            draft.tools()[3]["query_params"],
            json!({"status": "${status}"})
        );
        assert!(
            draft
                .notes
                .iter()
                .any(|n| n.contains("/upload") && n.contains("image/png")),
            "{:?}",
            draft.notes
        );
        assert!(!draft.descriptor.to_string().contains("secret"));
    }

    #[test]
    fn tags_patterns_and_a_cap_pick_operations_and_say_what_was_left_out() {
        let only = Options {
            tags: vec!["store".into()],
            ..Options::default()
        };
        assert_eq!(draft(&petstore3(), &only).expect("draft").tools().len(), 1);
        let matching = Options {
            include: vec!["pet".into()],
            ..Options::default()
        };
        assert_eq!(
            draft(&petstore3(), &matching).expect("draft").tools().len(),
            4
        );
        let capped = Options {
            max_tools: 2,
            ..Options::default()
        };
        let small = draft(&petstore3(), &capped).expect("draft");
        assert_eq!(small.tools().len(), 2);
        assert!(
            small
                .notes
                .iter()
                .any(|n| n.contains("3 more operations") && n.contains("pet (2)")),
            "{:?}",
            small.notes
        );
        assert!(small.descriptor["todo"].to_string().contains("--tag"));
    }

    #[test]
    fn swagger_two_converts_too() {
        let doc = json!({
            "swagger": "2.0", "info": {"title": "Todo", "version": "1"},
            "host": "todo.example.com", "basePath": "/api", "schemes": ["http", "https"],
            "securityDefinitions": {"key": {"type": "apiKey", "in": "header", "name": "X-Key"}},
            "definitions": {"Item": {"type": "object", "properties": {"title": {"type": "string"}}, "required": ["title"]}},
            "paths": {
                "/items": {"post": {"operationId": "createItem", "parameters": [{"name": "item", "in": "body", "required": true, "schema": {"$ref": "#/definitions/Item"}}]},
                           "get": {"operationId": "listItems", "parameters": [{"name": "limit", "in": "query", "type": "integer", "minimum": 1}]}},
                "/items/{id}/photo": {"post": {"operationId": "setPhoto", "consumes": ["multipart/form-data"], "parameters": [
                    {"name": "id", "in": "path", "required": true, "type": "string"},
                    {"name": "caption", "in": "formData", "type": "string"}]}}
            }
        });
        let draft = draft(&doc, &Options::default()).expect("draft");
        crate::assert_validates(&draft);
        let web = &draft.descriptor["platforms"]["web"];
        assert_eq!(web["base_url"], "https://todo.example.com/api");
        assert_eq!(
            web["auth"],
            json!({"type": "api_key", "key_placement": "header", "key_name": "X-Key", "env_var": "TODO_API_KEY"})
        );
        assert_eq!(
            draft.tools()[0]["parameters"]["properties"]["limit"],
            json!({"type": "integer", "minimum": 1})
        );
        assert_eq!(draft.tools()[1]["body"], json!({"title": "${title}"}));
        assert_eq!(draft.tools()[2]["body_type"], "form");
        assert_eq!(draft.tools()[2]["endpoint"], "/items/${id}/photo");
    }

    #[test]
    fn an_undeclared_path_placeholder_becomes_a_parameter_and_null_keywords_are_unset() {
        let doc = json!({"openapi": "3.0.0", "info": {"title": "T", "version": "1"}, "servers": [{"url": "https://t.example.com"}],
            "paths": {"/users/{user}/items/{id}": {"get": {"operationId": "item",
                "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "array", "uniqueItems": null}}]}}}});
        let draft = draft(&doc, &Options::default()).expect("draft");
        crate::assert_validates(&draft);
        let tool = &draft.tools()[0];
        assert_eq!(tool["endpoint"], "/users/${user}/items/${id}");
        assert_eq!(
            tool["parameters"]["properties"]["user"],
            json!({"type": "string"})
        );
        assert_eq!(
            tool["parameters"]["properties"]["id"],
            json!({"type": "array"})
        );
        assert_eq!(tool["parameters"]["required"], json!(["id", "user"]));
    }

    #[test]
    fn references_fanning_out_stay_within_a_budget() {
        // Each level points at the next three times: 3^8 nodes if written out whole.
        let mut schemas = serde_json::Map::new();
        for level in 0..8 {
            let next = json!({"$ref": format!("#/components/schemas/L{}", level + 1)});
            schemas.insert(
                format!("L{level}"),
                json!({"type": "object", "properties": {"a": next, "b": next, "c": next}}),
            );
        }
        schemas.insert("L8".into(), json!({"type": "string"}));
        let doc = json!({"openapi": "3.0.0", "info": {"title": "T", "version": "1"}, "servers": [{"url": "https://t.example.com"}],
            "components": {"schemas": schemas},
            "paths": {"/x": {"post": {"operationId": "x", "requestBody": {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/L0"}}}}}}}});
        let draft = draft(&doc, &Options::default()).expect("draft");
        assert!(
            draft.descriptor.to_string().len() < 400_000,
            "{}",
            draft.descriptor.to_string().len()
        );
        assert!(
            draft.descriptor["todo"]
                .to_string()
                .contains("no security scheme")
        );
    }

    #[test]
    fn not_a_document_says_so() {
        assert!(draft(&json!({"hello": 1}), &Options::default()).is_err());
    }
}
