//! The approval policy: which calls run at once, which are announced, which ask the user and
//! which never run (`spec/desktop-control.zh.md` §4.3, §7.2).
//!
//! Pure: a [`Profile`] and a tool's [`ToolFacts`] go in, an [`Action`] comes out. Profiles
//! come from presets or from `config.json`; layers above the profile (a task, a prompt) can
//! only tighten the decision, never loosen it.
//!
//! ```
//! use aai_policy::{Action, Preset, ToolFacts};
//! use aai_descriptor::Risk;
//! let profile = Preset::Development.profile();
//! let facts = ToolFacts { name: "org.example.mail:send", category: "org.example.mail", risk: Risk::High };
//! assert_eq!(profile.decide(&facts, &[]), Action::RequireApproval);
//! ```

use std::collections::BTreeMap;

pub use aai_descriptor::Risk;
use serde::{Deserialize, Serialize};

/// What happens to a call, from loosest to strictest. The order is the point: tightening a
/// decision means taking the maximum.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    /// Runs without asking.
    AutoApprove,
    /// Runs without asking; the user is told afterwards.
    NotifyOnly,
    /// Runs only after the user allows it (or a remembered grant does).
    RequireApproval,
    /// Never runs; no consent or grant can change that.
    AlwaysBlock,
}

/// The profile's global switch.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Decide by the rules alone.
    Auto,
    /// Decide by the rules; the presets make risky tools ask (the default).
    #[default]
    Supervised,
    /// Every call asks the user, whatever the rules say (blocked calls stay blocked).
    Locked,
}

/// The four preset templates of §4.3.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Preset {
    /// 全自动: automation pipelines.
    FullAuto,
    /// 开发模式: everyday use (the default).
    Development,
    /// 严格模式: sensitive environments.
    Strict,
    /// 观察模式: first use and demos.
    Observe,
}

impl Preset {
    pub fn profile(self) -> Profile {
        use Action::{AlwaysBlock as B, AutoApprove as A, RequireApproval as R};
        let (mode, [low, medium, high, critical]) = match self {
            Self::FullAuto => (Mode::Auto, [A, A, A, R]),
            Self::Development => (Mode::Supervised, [A, A, R, B]),
            Self::Strict => (Mode::Supervised, [A, R, R, B]),
            Self::Observe => (Mode::Locked, [R, R, R, B]),
        };
        Profile {
            mode,
            risk_policies: RiskPolicies {
                low,
                medium,
                high,
                critical,
            },
            category_overrides: BTreeMap::new(),
            tool_overrides: BTreeMap::new(),
        }
    }
}

/// The action for each risk level.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RiskPolicies {
    pub low: Action,
    pub medium: Action,
    pub high: Action,
    pub critical: Action,
}

impl RiskPolicies {
    pub fn get(&self, risk: Risk) -> Action {
        match risk {
            Risk::Low => self.low,
            Risk::Medium => self.medium,
            Risk::High => self.high,
            Risk::Critical => self.critical,
        }
    }
}

/// A policy profile ("project" in the spec).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Profile {
    pub mode: Mode,
    pub risk_policies: RiskPolicies,
    /// By category (for descriptor tools: the appId).
    pub category_overrides: BTreeMap<String, Action>,
    /// By tool (`<appId>:<tool>` for descriptor tools); wins over categories and risks.
    pub tool_overrides: BTreeMap<String, Action>,
}

impl Default for Profile {
    fn default() -> Self {
        Preset::Development.profile()
    }
}

/// What the policy needs to know about one tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ToolFacts<'a> {
    /// The tool's policy name: `<appId>:<tool>` for descriptor tools.
    pub name: &'a str,
    pub category: &'a str,
    pub risk: Risk,
}

/// A layer above the profile (a task's or a prompt's overrides): it can only tighten.
pub type Tightening = BTreeMap<String, Action>;

impl Profile {
    /// The decision for a call: tool override, else category override, else the risk's
    /// policy; then `locked` mode asks for everything not blocked; then every tightening layer
    /// (matched by tool name, then category) can make it stricter, never looser.
    pub fn decide(&self, tool: &ToolFacts<'_>, layers: &[Tightening]) -> Action {
        let mut action = self
            .tool_overrides
            .get(tool.name)
            .or_else(|| self.category_overrides.get(tool.category))
            .copied()
            .unwrap_or_else(|| self.risk_policies.get(tool.risk));
        if self.mode == Mode::Locked {
            action = action.max(Action::RequireApproval);
        }
        for layer in layers {
            if let Some(tighter) = layer.get(tool.name).or_else(|| layer.get(tool.category)) {
                action = action.max(*tighter);
            }
        }
        action
    }
}

/// A tool's risk: the descriptor's `risk`, else derived from its hints — read-only is low,
/// destructive is high, anything else medium.
pub fn derive_risk(risk: Option<Risk>, read_only: Option<bool>, destructive: Option<bool>) -> Risk {
    match (risk, read_only, destructive) {
        (Some(risk), _, _) => risk,
        (None, _, Some(true)) => Risk::High,
        (None, Some(true), _) => Risk::Low,
        _ => Risk::Medium,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn facts(risk: Risk) -> ToolFacts<'static> {
        ToolFacts {
            name: "org.example.app:do",
            category: "org.example.app",
            risk,
        }
    }

    #[test]
    fn presets_match_the_spec_table() {
        use Action::{AlwaysBlock as B, AutoApprove as A, RequireApproval as R};
        let rows = [
            (Preset::FullAuto, [A, A, A, R]),
            (Preset::Development, [A, A, R, B]),
            (Preset::Strict, [A, R, R, B]),
            (Preset::Observe, [R, R, R, B]),
        ];
        for (preset, expected) in rows {
            let profile = preset.profile();
            let got: Vec<Action> = [Risk::Low, Risk::Medium, Risk::High, Risk::Critical]
                .into_iter()
                .map(|risk| profile.decide(&facts(risk), &[]))
                .collect();
            assert_eq!(got, expected, "{preset:?}");
        }
    }

    #[test]
    fn overrides_take_precedence_tool_over_category_over_risk() {
        let mut profile = Preset::Development.profile();
        profile
            .category_overrides
            .insert("org.example.app".into(), Action::NotifyOnly);
        assert_eq!(profile.decide(&facts(Risk::High), &[]), Action::NotifyOnly);
        profile
            .tool_overrides
            .insert("org.example.app:do".into(), Action::AlwaysBlock);
        assert_eq!(profile.decide(&facts(Risk::Low), &[]), Action::AlwaysBlock);
    }

    #[test]
    fn locked_mode_asks_for_everything_but_keeps_blocks() {
        let mut profile = Preset::FullAuto.profile();
        profile.mode = Mode::Locked;
        assert_eq!(
            profile.decide(&facts(Risk::Low), &[]),
            Action::RequireApproval
        );
        profile
            .tool_overrides
            .insert("org.example.app:do".into(), Action::AlwaysBlock);
        assert_eq!(profile.decide(&facts(Risk::Low), &[]), Action::AlwaysBlock);
    }

    #[test]
    fn hints_give_a_risk() {
        assert_eq!(derive_risk(None, Some(true), None), Risk::Low);
        assert_eq!(derive_risk(None, None, Some(true)), Risk::High);
        assert_eq!(derive_risk(None, Some(true), Some(true)), Risk::High);
        assert_eq!(derive_risk(None, None, None), Risk::Medium);
        assert_eq!(
            derive_risk(Some(Risk::Critical), Some(true), None),
            Risk::Critical
        );
    }

    #[test]
    fn profiles_read_from_json() {
        let profile: Profile = serde_json::from_str(
            r#"{"mode": "auto", "risk_policies": {"low": "auto_approve", "medium": "notify_only", "high": "require_approval", "critical": "always_block"},
                "category_overrides": {"org.example.app": "require_approval"}, "tool_overrides": {}}"#,
        )
        .expect("profile");
        assert_eq!(
            profile.decide(&facts(Risk::Low), &[]),
            Action::RequireApproval
        );
    }

    fn action() -> impl Strategy<Value = Action> {
        prop_oneof![
            Just(Action::AutoApprove),
            Just(Action::NotifyOnly),
            Just(Action::RequireApproval),
            Just(Action::AlwaysBlock)
        ]
    }

    fn risk() -> impl Strategy<Value = Risk> {
        prop_oneof![
            Just(Risk::Low),
            Just(Risk::Medium),
            Just(Risk::High),
            Just(Risk::Critical)
        ]
    }

    fn mode() -> impl Strategy<Value = Mode> {
        prop_oneof![Just(Mode::Auto), Just(Mode::Supervised), Just(Mode::Locked)]
    }

    /// Keys that do and do not match the tool, so layers hit by name, by category or not at all.
    fn key() -> impl Strategy<Value = String> {
        prop_oneof![
            Just("org.example.app:do".to_owned()),
            Just("org.example.app".to_owned()),
            Just("other:x".to_owned())
        ]
    }

    fn overrides() -> impl Strategy<Value = BTreeMap<String, Action>> {
        proptest::collection::btree_map(key(), action(), 0..3)
    }

    proptest! {
        #[test]
        fn no_combination_of_layers_loosens_the_profile(
            mode in mode(), policies in proptest::array::uniform4(action()), categories in overrides(),
            tools in overrides(), layers in proptest::collection::vec(overrides(), 0..4), risk in risk(),
        ) {
            let profile = Profile {
                mode,
                risk_policies: RiskPolicies { low: policies[0], medium: policies[1], high: policies[2], critical: policies[3] },
                category_overrides: categories,
                tool_overrides: tools,
            };
            let base = profile.decide(&facts(risk), &[]);
            let layered = profile.decide(&facts(risk), &layers);
            prop_assert!(layered >= base, "{layered:?} is looser than {base:?}");
            if base == Action::AlwaysBlock {
                prop_assert_eq!(layered, Action::AlwaysBlock);
            }
        }
    }
}
