//! What the gateway lists of a server beyond its own tools: the sign-in tool, the tools that
//! reach its resources and prompts, and a server tool as a descriptor tool.

use super::*;

/// The one tool of a server whose OAuth sign-in has not been made.
pub(crate) const SIGN_IN: &str = "mcp_sign_in";

/// Whether `descriptor`'s server is reached with an OAuth sign-in.
pub(crate) fn signs_in(descriptor: &Descriptor) -> bool {
    descriptor
        .credentialed(Platform::Mcp)
        .and_then(|s| s.auth)
        .is_some_and(|a| a.kind == "oauth2")
}

/// `descriptor` offering only [`SIGN_IN`]: its tools cannot be listed before the user signs in.
pub(crate) fn sign_in_only(descriptor: &Descriptor) -> Listed {
    let mut filled = descriptor.clone();
    if let Some(section) = filled.platforms.mcp.as_mut() {
        section.fields.listed = true;
        section.tools = vec![Tool {
            common: ToolCommon {
                name: SIGN_IN.to_owned(),
                description: "Sign in to the server: the user confirms its sign-in site and approves access there. Its tools are listed after; read this guide again.".into(),
                parameters: Some(Parameters::from_value(&json!({"type": "object", "properties": {}}))),
                timeout: Some(600),
                // The gate asks the user about the sign-in site itself (high), and the user
                // approves access on the server's own page.
                risk: Some(Risk::Low),
                read_only: Some(true),
                destructive: None,
            },
            fields: McpTool {},
        }];
    }
    filled.description = format!(
        "{} Needs the user's sign-in first (mcp_sign_in).",
        filled.description.trim_end()
    );
    Listed {
        descriptor: Arc::new(filled),
        changed: HashMap::new(),
        reaches: vec![SIGN_IN.to_owned()],
    }
}

/// The tools through which a server's resources and prompts are reached.
pub(crate) const RESOURCES_LIST: &str = "mcp_resources_list";
pub(crate) const RESOURCE_READ: &str = "mcp_resource_read";
pub(crate) const PROMPTS_LIST: &str = "mcp_prompts_list";
pub(crate) const PROMPT_GET: &str = "mcp_prompt_get";

pub(crate) fn reach_tools(resources: bool, prompts: bool) -> Vec<ToolCommon> {
    let tool = |name: &str, description: &str, schema: Value| ToolCommon {
        name: name.to_owned(),
        description: description.into(),
        parameters: Some(Parameters::from_value(&schema)),
        timeout: None,
        risk: Some(Risk::Medium),
        read_only: Some(true),
        destructive: None,
    };
    let mut tools = Vec::new();
    if resources {
        tools.push(tool(
            RESOURCES_LIST,
            "List the server's resources (uri, name, description, mimeType).",
            json!({"type": "object", "properties": {}}),
        ));
        tools.push(tool(
            RESOURCE_READ,
            "Read one of the server's resources by its URI.",
            json!({"type": "object", "properties": {"uri": {"type": "string", "description": "A URI from mcp_resources_list"}}, "required": ["uri"]}),
        ));
    }
    if prompts {
        tools.push(tool(
            PROMPTS_LIST,
            "List the server's prompts (name, description, arguments).",
            json!({"type": "object", "properties": {}}),
        ));
        tools.push(tool(
            PROMPT_GET,
            "Get one of the server's prompts, filled with its arguments.",
            json!({"type": "object", "properties": {"name": {"type": "string"}, "arguments": {"type": "object", "additionalProperties": {"type": "string"}}}, "required": ["name"]}),
        ));
    }
    tools
}

/// Runs one of [`reach_tools`] on `peer`; `None` for any other tool.
pub(crate) async fn reach(
    peer: &rmcp::Peer<rmcp::RoleClient>,
    tool: &str,
    args: &Map<String, Value>,
) -> Option<Result<Value, rmcp::ServiceError>> {
    fn to_json<T: serde::Serialize>(value: &T) -> Value {
        serde_json::to_value(value).unwrap_or_default()
    }
    let text = |key: &str| {
        args.get(key)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    Some(match tool {
        RESOURCES_LIST => peer.list_all_resources().await.map(|r| to_json(&r)),
        RESOURCE_READ => peer
            .read_resource(rmcp::model::ReadResourceRequestParams::new(text("uri")))
            .await
            .map(|r| to_json(&r.contents)),
        PROMPTS_LIST => peer.list_all_prompts().await.map(|r| to_json(&r)),
        PROMPT_GET => {
            let mut params = rmcp::model::GetPromptRequestParams::new(text("name"));
            if let Some(arguments) = args.get("arguments").and_then(Value::as_object) {
                params = params.with_arguments(arguments.clone());
            }
            peer.get_prompt(params).await.map(|r| to_json(&r.messages))
        }
        _ => return None,
    })
}

/// The credential an http server's requests carry, as a web app's would: from the plugged
/// web auth (an environment variable bound to the origin, the credential store, OAuth), else
/// — a command with no gateway around it, like `doctor` — from the variable it names.
pub(crate) async fn credential(
    descriptor: &Descriptor,
    url: &str,
    section_auth: &Value,
    auth: Option<&dyn aai_executor::rest::Auth>,
) -> Result<Option<aai_executor::rest::Credential>, AaiError> {
    let web_auth: aai_descriptor::WebAuth =
        serde_json::from_value(section_auth.clone()).map_err(|e| {
            AaiError::new(
                ErrorKind::AuthConfigInvalid,
                format!("{}: `auth`: {e}", descriptor.app_id),
            )
        })?;
    let section = aai_descriptor::WebSection {
        base_url: url.to_owned(),
        auth: Some(web_auth.clone()),
        default_headers: None,
    };
    if let Some(auth) = auth {
        return auth.credential(descriptor, &section).await;
    }
    let var = web_auth.fields.get("env_var").and_then(Value::as_str);
    let secret = var
        .filter(|_| !descriptor.fetched)
        .and_then(|v| std::env::var(v).ok())
        .filter(|s| !s.is_empty());
    match secret {
        Some(secret) => Ok(Some(aai_executor::rest::credential_for(&web_auth, secret))),
        None => Err(AaiError::new(
            ErrorKind::AuthRequired,
            format!(
                "{}: the MCP server needs a credential: set {} in the gateway's environment",
                descriptor.app_id,
                var.unwrap_or("the variable its `auth` names (`env_var`)")
            ),
        )),
    }
}

/// AUTOMATION_FAILED: the server of `app` cannot be started, and why.
pub(crate) fn cannot_start(
    app: &str,
    spec: Option<&Spec>,
    why: &dyn std::fmt::Display,
) -> AaiError {
    let server = spec
        .map(|s| format!(" ({})", s.program()))
        .unwrap_or_default();
    AaiError::new(
        ErrorKind::AutomationFailed,
        format!("{app}: the MCP server{server} cannot be started: {why}"),
    )
    .with_detail(json!({"reason": "mcp_server_unavailable"}))
}

/// A server's tool as the gateway offers it: the server's description (control characters
/// removed: a person reads it in a question) and schema, its risk from the user's word, else
/// the tool's annotations.
pub(crate) fn common_of(
    tool: &rmcp::model::Tool,
    user: Option<&ToolCommon>,
    configured: Option<Risk>,
    // `Some(true)`: its definition changed since pinned; `Some(false)`: it is new since the
    // server was first listed.
    changed: Option<bool>,
    app: &str,
) -> ToolCommon {
    let annotations = tool.annotations.as_ref();
    let read_only = annotations.and_then(|a| a.read_only_hint);
    let destructive = annotations.and_then(|a| a.destructive_hint);
    let from_hints = if read_only == Some(true) {
        Risk::Low
    } else if destructive == Some(true) {
        Risk::High
    } else {
        Risk::Medium
    };
    let mut risk = configured
        .or(user.and_then(|u| u.risk))
        .unwrap_or(from_hints);
    // A tool that came later is asked about like a dangerous one until the user has read it.
    if changed == Some(false) {
        risk = risk.max(Risk::High);
    }
    let mut description = visible(
        tool.description
            .as_deref()
            .or(tool.title.as_deref())
            .unwrap_or("(the server gives no description)"),
    );
    match changed {
        Some(true) => {
            description = format!(
                "[CHANGED since it was pinned: refused until the user runs `aai-gateway consent approve {app} {}`] {description}",
                tool.name
            );
        }
        Some(false) => {
            description = format!(
                "[NEW since the server was first listed: risk at least high until the user runs `aai-gateway consent approve {app} {}`] {description}",
                tool.name
            );
        }
        None => {}
    }
    ToolCommon {
        name: tool.name.to_string(),
        description: description.into(),
        parameters: Some(Parameters::from_value(&Value::Object(
            (*tool.input_schema).clone(),
        ))),
        timeout: user.and_then(|u| u.timeout),
        risk: Some(risk),
        read_only: user.and_then(|u| u.read_only).or(read_only),
        destructive: user.and_then(|u| u.destructive).or(destructive),
    }
}

/// `text` as a person and the agent read it: every hidden character (controls, bidi
/// overrides, zero-width and tag characters) shown as an escape; line breaks and tabs stay.
pub(crate) fn visible(text: &str) -> String {
    aai_descriptor::visible::visible_lines(text).into_owned()
}
