//! The `policy` section of `config.json`: named profiles and which client gets which.

use std::collections::BTreeMap;

use aai_policy::{Action, Mode, Preset, Profile};
use serde::Deserialize;

/// `"policy": {"default_profile": …, "profiles": {…}, "rules": […]}`.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct PolicyConfig {
    /// The profile for clients no rule names: a profile name or a preset
    /// (`full_auto`, `development`, `strict`, `observe`).
    pub default_profile: String,
    pub profiles: BTreeMap<String, ProfileConfig>,
    /// First match wins.
    pub rules: Vec<ProfileRule>,
}

impl Default for PolicyConfig {
    fn default() -> Self {
        Self {
            default_profile: "development".into(),
            profiles: BTreeMap::new(),
            rules: Vec::new(),
        }
    }
}

/// A profile: a preset to start from, then any of its parts replaced.
#[derive(Debug, Clone, Default, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct ProfileConfig {
    pub preset: Option<Preset>,
    pub mode: Option<Mode>,
    pub risk_policies: RiskPoliciesConfig,
    pub category_overrides: BTreeMap<String, Action>,
    pub tool_overrides: BTreeMap<String, Action>,
}

#[derive(Debug, Clone, Default, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct RiskPoliciesConfig {
    pub low: Option<Action>,
    pub medium: Option<Action>,
    pub high: Option<Action>,
    pub critical: Option<Action>,
}

/// Gives `profile` to a client by its name (compared without case), by one of its roots
/// (a path prefix; `file://` URIs from the client's `roots/list`), or by both.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProfileRule {
    #[serde(default)]
    pub client: Option<String>,
    #[serde(default)]
    pub root: Option<String>,
    pub profile: String,
}

impl ProfileRule {
    fn matches(&self, client: &str, roots: &[String]) -> bool {
        let name_ok = self
            .client
            .as_deref()
            .is_none_or(|c| c.eq_ignore_ascii_case(client));
        let root_ok = self.root.as_deref().is_none_or(|prefix| {
            let prefix = prefix.trim_end_matches('/');
            roots.iter().any(|root| {
                let path = root
                    .strip_prefix("file://")
                    .unwrap_or(root)
                    .trim_end_matches('/');
                path == prefix || path.starts_with(&format!("{prefix}/"))
            })
        });
        (self.client.is_some() || self.root.is_some()) && name_ok && root_ok
    }
}

fn preset_named(name: &str) -> Option<Preset> {
    serde_json::from_value(serde_json::Value::String(name.to_owned())).ok()
}

impl ProfileConfig {
    fn build(&self) -> Profile {
        let mut profile = self.preset.unwrap_or(Preset::Development).profile();
        if let Some(mode) = self.mode {
            profile.mode = mode;
        }
        let policies = &mut profile.risk_policies;
        let given = &self.risk_policies;
        for (slot, value) in [
            (&mut policies.low, given.low),
            (&mut policies.medium, given.medium),
            (&mut policies.high, given.high),
            (&mut policies.critical, given.critical),
        ] {
            if let Some(value) = value {
                *slot = value;
            }
        }
        profile
            .category_overrides
            .clone_from(&self.category_overrides);
        profile.tool_overrides.clone_from(&self.tool_overrides);
        profile
    }
}

impl PolicyConfig {
    /// The configuration used when `config.json` cannot be read: every call asks (fail closed).
    pub fn fail_closed() -> Self {
        Self {
            default_profile: "observe".into(),
            ..Self::default()
        }
    }

    /// Whether any rule looks at roots (only then are a client's roots worth asking for).
    pub fn uses_roots(&self) -> bool {
        self.rules.iter().any(|rule| rule.root.is_some())
    }

    /// The profile (and its name) for a client with these roots.
    pub fn profile_for(&self, client: &str, roots: &[String]) -> (String, Profile) {
        let name = self
            .rules
            .iter()
            .find(|rule| rule.matches(client, roots))
            .map_or(self.default_profile.as_str(), |rule| rule.profile.as_str());
        (name.to_owned(), self.named(name))
    }

    fn named(&self, name: &str) -> Profile {
        if let Some(config) = self.profiles.get(name) {
            return config.build();
        }
        match preset_named(name) {
            Some(preset) => preset.profile(),
            None => {
                // A typo in a profile name must not open the gates: ask for everything.
                tracing::warn!(
                    profile = name,
                    "unknown policy profile; using the observe preset"
                );
                Preset::Observe.profile()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aai_policy::{Risk, ToolFacts};

    fn decide(config: &PolicyConfig, client: &str, risk: Risk) -> Action {
        let facts = ToolFacts {
            name: "org.example.app:do",
            category: "org.example.app",
            risk,
        };
        config.profile_for(client, &[]).1.decide(&facts, &[])
    }

    #[test]
    fn clients_get_their_profiles() {
        let config: PolicyConfig = serde_json::from_str(
            r#"{"default_profile": "strict",
                "profiles": {"ci": {"preset": "full_auto", "risk_policies": {"critical": "always_block"}},
                             "mine": {"tool_overrides": {"org.example.app:do": "always_block"}}},
                "rules": [{"client": "CI-Runner", "profile": "ci"}, {"client": "cursor", "profile": "mine"}, {"client": "typo", "profile": "nope"}]}"#,
        )
        .expect("config");
        assert_eq!(
            decide(&config, "ci-runner", Risk::High),
            Action::AutoApprove
        );
        assert_eq!(
            decide(&config, "ci-runner", Risk::Critical),
            Action::AlwaysBlock
        );
        assert_eq!(decide(&config, "cursor", Risk::Low), Action::AlwaysBlock);
        assert_eq!(
            decide(&config, "claude-code", Risk::Medium),
            Action::RequireApproval,
            "strict default"
        );
        assert_eq!(
            decide(&config, "typo", Risk::Low),
            Action::RequireApproval,
            "unknown profile fails closed"
        );
    }
}
