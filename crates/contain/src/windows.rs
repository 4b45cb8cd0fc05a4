//! Windows: the restricted-token plan. The launcher would run the command with a restricted
//! token whose restricting SID is `RESTRICTED` (S-1-5-12), so a write succeeds only where that
//! SID may write; the plan is the `icacls` programs that grant it the allowed folders and deny
//! it the gateway's home (writes) and secrets (reads), each path one argument of its own. Built
//! and tested here at that boundary; not yet applied on Windows (`aai-gateway doctor` says so).

use std::path::PathBuf;

use crate::Profile;
use crate::rules::SECRETS;

/// The SID the restricted token is restricted to, as `icacls` names it.
pub const RESTRICTED: &str = "*S-1-5-12";

/// The `icacls` programs (argv) that prepare the folders for `profile`.
pub fn acl_plan(profile: &Profile) -> Vec<Vec<String>> {
    let mut plan = Vec::new();
    let mut icacls = |path: &PathBuf, verb: &str, rights: &str| {
        plan.push(vec![
            "icacls".to_owned(),
            path.to_string_lossy().into_owned(),
            verb.to_owned(),
            format!("{RESTRICTED}:{rights}"),
        ]);
    };
    for dir in profile.write.iter().chain(&profile.temp) {
        icacls(dir, "/grant", "(OI)(CI)M");
    }
    // Deny entries win over grants inherited from an allowed folder above.
    for dir in std::iter::once(&profile.home).chain(&profile.protect) {
        icacls(dir, "/deny", "(OI)(CI)(W,D,DC)");
    }
    for secret in SECRETS {
        icacls(&profile.home.join(secret), "/deny", "(OI)(CI)(R)");
    }
    plan
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_path_is_one_argument_and_the_home_is_denied_after_the_grants() {
        let evil = r#"C:\Users\me\a" & del /q C:\ & ""#;
        let profile = Profile {
            write: vec![evil.into(), r"C:\Users\me\Projects".into()],
            temp: Some(r"C:\Users\me\AppData\Local\Temp".into()),
            home: r"C:\Users\me\.aai".into(),
            ..Profile::default()
        };
        let plan = acl_plan(&profile);
        assert_eq!(plan[0], ["icacls", evil, "/grant", "*S-1-5-12:(OI)(CI)M"]);
        assert!(
            plan.iter()
                .all(|argv| argv.len() == 4 && argv[0] == "icacls")
        );
        let home = plan
            .iter()
            .position(|a| a[1] == r"C:\Users\me\.aai" && a[2] == "/deny")
            .expect("home denied");
        let last_grant = plan.iter().rposition(|a| a[2] == "/grant").expect("grants");
        assert!(home > last_grant);
        assert_eq!(
            plan.iter().filter(|a| a[3].ends_with("(R)")).count(),
            SECRETS.len()
        );
    }
}
