//! What an app from the store may touch — the origins it talks to and the credentials it asks
//! for — and what changes between two versions, for the install and update questions.

use super::*;

/// What the user is shown before an install: platforms, tools and their risk.
pub fn summary(descriptor: &aai_descriptor::Descriptor) -> Vec<(String, String, String)> {
    let mut tools = Vec::new();
    for platform in aai_descriptor::Platform::ALL {
        for tool in descriptor.tools(platform).unwrap_or_default() {
            let risk = aai_policy::derive_risk(tool.risk, tool.read_only, tool.destructive);
            tools.push((
                platform.key().to_owned(),
                tool.name.clone(),
                crate::gate::risk_name(risk).to_owned(),
            ));
        }
    }
    tools
}

/// A credential a descriptor asks for, and where it would go.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Credential {
    /// The value of an environment variable of the gateway, sent to `origin`.
    Env { var: String, origin: String },
    /// A key or token the user stores with `aai-gateway auth set`, sent to `origin`.
    Stored { origin: String },
    /// An OAuth sign-in at `at`, tokens from `token`, for `scopes`, then sent to `origin`.
    OAuth {
        at: String,
        token: String,
        scopes: String,
        origin: String,
    },
}

impl Credential {
    /// One line for the install and update questions.
    pub fn describe(&self, app_id: &str) -> String {
        match self {
            Self::Env { var, origin } => {
                format!("the environment variable {var}, sent to {origin}")
            }
            Self::Stored { origin } => {
                format!("a key you store with `aai-gateway auth set {app_id}`, sent to {origin}")
            }
            Self::OAuth {
                at,
                token,
                scopes,
                origin,
            } => format!(
                "an OAuth sign-in at {at} (tokens from {token}) for scopes [{scopes}], sent to {origin}"
            ),
        }
    }
}

/// What a descriptor may touch beyond the local apps: every credential it asks for and every
/// origin it talks to.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Reach {
    pub credentials: std::collections::BTreeSet<Credential>,
    pub origins: std::collections::BTreeSet<String>,
}

/// [`Reach`] of a descriptor: its web section and an MCP server it reaches over HTTP (desktop
/// sections talk to local apps only; a store app cannot start a command).
pub fn reach(descriptor: &aai_descriptor::Descriptor) -> Reach {
    let mut reach = Reach::default();
    for platform in [aai_descriptor::Platform::Web, aai_descriptor::Platform::Mcp] {
        if let Some(section) = descriptor.credentialed(platform) {
            add(&mut reach, &section.base_url, section.auth.as_ref());
        }
    }
    reach
}

/// What talking to `base_url` with `auth` adds to `reach`.
fn add(reach: &mut Reach, base_url: &str, auth: Option<&aai_descriptor::WebAuth>) {
    let origin = aai_executor::rest::origin_of(base_url).unwrap_or_else(|| base_url.to_owned());
    reach.origins.insert(origin.clone());
    let Some(auth) = auth else {
        return;
    };
    let text = |name: &str| auth.fields.get(name).and_then(Value::as_str);
    match auth.kind.as_str() {
        "none" => {}
        "oauth2" => {
            let at = text("auth_url").unwrap_or_default();
            let token = text("token_url").unwrap_or_default();
            let at_origin = aai_executor::rest::origin_of(at).unwrap_or_else(|| at.to_owned());
            let token_origin =
                aai_executor::rest::origin_of(token).unwrap_or_else(|| token.to_owned());
            reach.origins.insert(at_origin.clone());
            reach.origins.insert(token_origin.clone());
            reach.credentials.insert(Credential::OAuth {
                at: at_origin,
                token: token_origin,
                scopes: crate::web::auth::scopes(auth),
                origin,
            });
        }
        _ => {
            if let Some(var) = text("env_var") {
                reach.credentials.insert(Credential::Env {
                    var: var.to_owned(),
                    origin: origin.clone(),
                });
            }
            reach.credentials.insert(Credential::Stored { origin });
        }
    }
}

/// What changes in what an app may touch: credentials and origins added or dropped.
pub fn reach_diff(old: &Reach, new: &Reach, app_id: &str) -> Vec<String> {
    let mut lines = Vec::new();
    for origin in new.origins.difference(&old.origins) {
        lines.push(format!("+ talks to {origin}"));
    }
    for origin in old.origins.difference(&new.origins) {
        lines.push(format!("- no longer talks to {origin}"));
    }
    for credential in new.credentials.difference(&old.credentials) {
        lines.push(format!("+ credential: {}", credential.describe(app_id)));
    }
    for credential in old.credentials.difference(&new.credentials) {
        lines.push(format!("- credential: {}", credential.describe(app_id)));
    }
    lines
}

/// What changes between an installed descriptor and a new one: tools added, removed, and
/// risk changes, as lines.
pub fn diff(old: &aai_descriptor::Descriptor, new: &aai_descriptor::Descriptor) -> Vec<String> {
    let before: BTreeMap<(String, String), String> = summary(old)
        .into_iter()
        .map(|(p, t, r)| ((p, t), r))
        .collect();
    let after: BTreeMap<(String, String), String> = summary(new)
        .into_iter()
        .map(|(p, t, r)| ((p, t), r))
        .collect();
    let mut lines = Vec::new();
    for ((platform, tool), risk) in &after {
        match before.get(&(platform.clone(), tool.clone())) {
            None => lines.push(format!("+ {platform} {tool} (risk {risk})")),
            Some(old) if old != risk => {
                lines.push(format!("~ {platform} {tool}: risk {old} → {risk}"));
            }
            Some(_) => {}
        }
    }
    for (platform, tool) in before.keys() {
        if !after.contains_key(&(platform.clone(), tool.clone())) {
            lines.push(format!("- {platform} {tool}"));
        }
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mcp(url: &str) -> aai_descriptor::Descriptor {
        let doc = serde_json::json!({"schema_version": "1.0", "appId": "org.example.remote",
            "name": "Remote", "description": "A remote MCP server.",
            "platforms": {"mcp": {"automation": "http", "url": url,
                "auth": {"type": "api_key", "key_name": "X-Key", "env_var": "REMOTE_KEY"}}}});
        aai_descriptor::parse("test", doc.to_string().as_bytes()).expect("valid")
    }

    #[test]
    fn an_mcp_servers_origin_and_credentials_are_what_the_install_shows() {
        let first = reach(&mcp("https://mcp.example.com/mcp"));
        assert!(
            first.origins.contains("https://mcp.example.com:443"),
            "{first:?}"
        );
        assert!(first.credentials.contains(&Credential::Env {
            var: "REMOTE_KEY".into(),
            origin: "https://mcp.example.com:443".into()
        }));
        // An update that moves the server says so.
        let moved = reach(&mcp("https://elsewhere.example.net/mcp"));
        let lines = reach_diff(&first, &moved, "org.example.remote");
        assert!(
            lines
                .iter()
                .any(|l| l == "+ talks to https://elsewhere.example.net:443"),
            "{lines:?}"
        );
        assert!(
            lines.iter().any(|l| l.starts_with(
                "+ credential: the environment variable REMOTE_KEY, sent to https://elsewhere"
            )),
            "{lines:?}"
        );
    }
}
