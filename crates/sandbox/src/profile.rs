//! How what the agent starts is contained: the `local.containment` setting, the profile a
//! terminal session, a launched app or a scheduled agent runs under ([`aai_contain`]), the
//! refusal where no sandbox can apply, and the per-call `outside_sandbox` request that the
//! user is asked about every time.

use aai_descriptor::{AaiError, ErrorKind};
use serde_json::{Map, Value, json};

use aai_toolset::{Containment, Setup};

/// The argument that asks for a call outside the sandbox, and the one saying why.
pub const OUTSIDE: &str = "outside_sandbox";
pub const REASON: &str = "reason";

/// Whether the call asks to run outside the sandbox.
pub fn asks_outside(args: &Map<String, Value>) -> bool {
    args.get(OUTSIDE).and_then(Value::as_bool) == Some(true)
}

/// What the user is told when asked about a call outside the sandbox.
pub fn outside_question(args: &Map<String, Value>) -> String {
    let reason = args
        .get(REASON)
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|r| !r.is_empty())
        .unwrap_or("(no reason given)");
    format!(
        "it asks to run OUTSIDE the sandbox, with your full rights over every file (asked every time, never remembered); the agent's reason: {reason}"
    )
}

/// Refuses a call outside the sandbox that has no reason, or that the user did not approve
/// just now (a toolset run directly, past the gate).
///
/// # Errors
/// INVALID_PARAMS without a reason, PERMISSION_DENIED when not approved.
pub fn check_outside(args: &Map<String, Value>, approved: bool) -> Result<(), AaiError> {
    let reason = args.get(REASON).and_then(Value::as_str).map(str::trim);
    if reason.is_none_or(str::is_empty) {
        return Err(AaiError::new(
            ErrorKind::InvalidParams,
            "`outside_sandbox: true` needs a `reason` saying why the command cannot run in the sandbox",
        )
        .with_detail(json!({"field": REASON})));
    }
    if !approved {
        return Err(AaiError::new(
            ErrorKind::PermissionDenied,
            "a call outside the sandbox runs only when the user approved it just now",
        )
        .with_detail(json!({"reason": "outside_sandbox_not_approved"})));
    }
    Ok(())
}

/// What the sandbox and the containment profile of a toolset's setup are.
pub trait Contained {
    /// The file sandbox for a client with these MCP roots.
    fn sandbox(&self, roots: &[String]) -> crate::Sandbox;

    /// The profile processes started for a client with these MCP roots run under; `None`
    /// when the config turns containment off.
    ///
    /// # Errors
    /// PERMISSION_DENIED where no sandbox can apply (the config must say `"none"` explicitly),
    /// AUTOMATION_FAILED when this process cannot run the launcher.
    fn containment(&self, roots: &[String]) -> Result<Option<aai_contain::Profile>, AaiError>;
}

impl Contained for Setup {
    fn sandbox(&self, roots: &[String]) -> crate::Sandbox {
        crate::Sandbox::new(&self.config.sandbox, roots, &self.protected)
    }

    fn containment(&self, roots: &[String]) -> Result<Option<aai_contain::Profile>, AaiError> {
        if self.config.containment == Containment::None {
            return Ok(None);
        }
        let support = aai_contain::support();
        if support.sandbox.is_none() && cfg!(not(target_os = "macos")) {
            return Err(AaiError::new(
                ErrorKind::PermissionDenied,
                format!(
                    "nothing the agent starts (terminal commands, apps) can be contained here: {}. It is refused rather than run with your full rights; to run such commands uncontained anyway, set \"local\": {{\"containment\": \"none\"}} in config.json (`aai-gateway doctor` shows what applies)",
                    support.detail
                ),
            )
            .with_detail(json!({"reason": "no_sandbox"})));
        }
        let sandbox = self.sandbox(roots);
        let write = sandbox
            .allowed()
            .iter()
            .cloned()
            .chain(
                self.config
                    .writable_caches
                    .iter()
                    .map(|c| aai_toolset::expand_home(c)),
            )
            .filter(|dir| dir.is_dir())
            .collect();
        Ok(Some(aai_contain::Profile {
            write,
            temp: Some(std::env::temp_dir()),
            home: self.home.clone(),
            protect: self
                .protected
                .iter()
                .filter(|p| **p != self.home)
                .cloned()
                .collect(),
            read: Vec::new(),
            programs: Vec::new(),
            cgroup: None,
            desktop: false,
            no_bus: false,
            deny: sandbox.secrets().to_vec(),
            own_temp: None,
            egress: None,
            home_readable: false,
        }))
    }
}

/// The program and arguments that run `program args…` under `profile`.
///
/// # Errors
/// AUTOMATION_FAILED when this process does not know the launcher (it is not the gateway's
/// binary and none was set), PERMISSION_DENIED where no sandbox program exists.
pub fn wrap(
    profile: &aai_contain::Profile,
    program: &str,
    args: &[String],
) -> Result<(String, Vec<String>), AaiError> {
    #[cfg(target_os = "macos")]
    return Ok(aai_contain::seatbelt::command(profile, program, args));
    #[cfg(target_os = "linux")]
    {
        let launcher = aai_contain::launcher().ok_or_else(|| {
            aai_toolset::failed(
                "the sandbox launcher is unknown: this process is not the aai-gateway binary (tests set it with aai_contain::set_launcher)",
            )
        })?;
        Ok(profile.command(launcher, program, args))
    }
    #[cfg(not(any(target_os = "linux", target_os = "macos")))]
    {
        let _ = (profile, program, args);
        Err(AaiError::new(
            ErrorKind::PermissionDenied,
            "no sandbox can be applied on this system yet; set \"local\": {\"containment\": \"none\"} in config.json to run commands uncontained",
        ))
    }
}

/// `aai-gateway doctor`'s line on containment.
pub fn doctor(config: &aai_toolset::LocalConfig) -> aai_toolset::Check {
    if config.containment == Containment::None {
        return aai_toolset::Check::ok(
            "containment",
            "off (local.containment is \"none\"): terminal commands, apps and scheduled agents run with your full rights",
        );
    }
    let support = aai_contain::support();
    match support.sandbox {
        Some(sandbox) => aai_toolset::Check::ok(
            "containment",
            format!(
                "{sandbox}: {}; network: {}",
                support.detail,
                match config.egress.mode {
                    aai_toolset::EgressMode::Proxy =>
                        "terminal commands and command-line launches reach it only through the gateway's proxy (package registries and local.egress.allow; never this computer's or a private network's addresses unless named, never the gateway's own ports)",
                    aai_toolset::EgressMode::Open => "open (local.egress.mode is \"open\")",
                }
            ),
        ),
        None if cfg!(target_os = "macos") => aai_toolset::Check::ok(
            "containment",
            "Seatbelt (sandbox-exec with a fixed profile): writes only beneath the allowed folders, the temporary folder and declared caches; AAI_HOME read-only, its secrets unreadable",
        ),
        None => aai_toolset::Check::failed(
            "containment",
            format!(
                "none can apply: {}. The terminal and app_launch refuse to run until local.containment is \"none\" in config.json",
                support.detail
            ),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_setting_reads_as_written_and_defaults_to_the_sandbox() {
        let read = |v: &str| serde_json::from_value::<Containment>(json!(v));
        assert_eq!(read("sandbox").ok(), Some(Containment::Sandbox));
        assert_eq!(read("landlock").ok(), Some(Containment::Sandbox));
        assert_eq!(read("none").ok(), Some(Containment::None));
        assert!(read("off").is_err());
        assert_eq!(Containment::default(), Containment::Sandbox);
    }

    #[test]
    fn a_call_outside_needs_a_reason_and_the_users_approval() {
        let args = |v: Value| v.as_object().cloned().unwrap_or_default();
        let no_reason = args(json!({"outside_sandbox": true, "reason": "  "}));
        assert_eq!(
            check_outside(&no_reason, true).map_err(|e| e.kind),
            Err(ErrorKind::InvalidParams)
        );
        let reasoned = args(json!({"outside_sandbox": true, "reason": "install into /opt"}));
        assert_eq!(
            check_outside(&reasoned, false).map_err(|e| e.kind),
            Err(ErrorKind::PermissionDenied)
        );
        assert!(check_outside(&reasoned, true).is_ok());
        assert!(asks_outside(&reasoned));
        assert!(!asks_outside(&args(json!({"outside_sandbox": false}))));
        assert!(outside_question(&reasoned).contains("install into /opt"));
    }

    #[test]
    fn the_profile_writes_the_allowed_folders_and_protects_the_gateways_own() {
        let dir = tempfile::tempdir().expect("dir");
        let allowed = dir.path().join("allowed");
        let home = dir.path().join("home");
        let cache = dir.path().join("web-cache");
        for d in [&allowed, &home, &cache] {
            std::fs::create_dir_all(d).expect("dir");
        }
        let mut config = aai_toolset::LocalConfig::default();
        config.sandbox.allowed_directories = vec![allowed.clone(), dir.path().join("missing")];
        config.writable_caches = Vec::new();
        let mut setup = Setup::new(config, vec![home.clone(), cache.clone()]);
        setup.home = home.clone();
        let profile = setup.containment(&[]).expect("a sandbox here").expect("on");
        assert_eq!(profile.write, [std::fs::canonicalize(&allowed).expect("c")]);
        assert_eq!(profile.home, home);
        assert_eq!(profile.protect, [cache]);
        setup.config.containment = Containment::None;
        assert!(setup.containment(&[]).expect("ok").is_none());
    }
}
