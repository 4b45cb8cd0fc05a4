//! Landlock on Linux: the rules of a [`Plan`] made into a ruleset and enforced on the calling
//! process (the launcher's second stage, just before it becomes the command), and the probe
//! `aai-gateway doctor` reports from.

use std::os::fd::OwnedFd;
use std::path::Path;

use landlock::{
    ABI, Access, AccessFs, BitFlags, CompatLevel, Compatible, LandlockStatus, PathBeneath,
    RestrictionStatus, Ruleset, RulesetAttr, RulesetCreatedAttr, RulesetStatus, Scope,
};

use crate::Support;
use crate::rules::Plan;

/// The newest ABI whose rights the launcher asks for (best effort below it).
const TARGET: ABI = ABI::V7;

/// What was enforced, as the launcher's probe reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Enforced {
    /// `full`, `partial` or `none`.
    pub ruleset: &'static str,
    /// The kernel's Landlock ABI (0: none).
    pub abi: i32,
    pub no_new_privs: bool,
    /// How many path rules were added.
    pub rules: usize,
}

fn read_access() -> BitFlags<AccessFs> {
    AccessFs::ReadFile | AccessFs::ReadDir | AccessFs::Execute
}

/// Every right but making device nodes.
fn write_access() -> BitFlags<AccessFs> {
    AccessFs::from_all(TARGET) & !(AccessFs::MakeChar | AccessFs::MakeBlock)
}

/// `path` opened without following a last link; `None` for a link or what cannot be opened.
pub(crate) fn open(path: &Path) -> Option<(OwnedFd, bool)> {
    use rustix::fs::{CWD, FileType, Mode, OFlags, fstat, openat};
    let fd = openat(
        CWD,
        path,
        OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .ok()?;
    let kind = FileType::from_raw_mode(fstat(&fd).ok()?.st_mode);
    if kind == FileType::Symlink {
        return None;
    }
    Some((fd, kind == FileType::Directory))
}

/// Enforces `plan` on this process (and everything it will `exec` or start).
///
/// # Errors
/// A message saying which step failed.
pub fn enforce(plan: &Plan) -> Result<Enforced, crate::ContainError> {
    use crate::ContainError;
    let handled = AccessFs::from_all(TARGET);
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(handled)
        .and_then(|r| {
            let scopes = if plan.desktop {
                Scope::from_all(TARGET) & !Scope::AbstractUnixSocket
            } else {
                Scope::from_all(TARGET)
            };
            r.scope(scopes)
        })
        .and_then(Ruleset::create)
        .map_err(ContainError::landlock("make a Landlock ruleset"))?;
    let file_rights = AccessFs::from_file(TARGET);
    // Listing folders is allowed everywhere; reading files only where the plan says.
    let wanted = std::iter::once((Path::new("/"), BitFlags::from(AccessFs::ReadDir)))
        .chain(plan.read.iter().map(|p| (p.as_path(), read_access())))
        .chain(plan.write.iter().map(|p| (p.as_path(), write_access())))
        .chain(
            plan.devices
                .iter()
                .map(|p| (p.as_path(), write_access() | AccessFs::IoctlDev)),
        );
    let mut rules = 0;
    for (path, access) in wanted {
        // What is gone or a link by now is skipped: it grants nothing.
        let Some((fd, dir)) = open(path) else {
            continue;
        };
        let access = if dir { access } else { access & file_rights };
        ruleset =
            ruleset
                .add_rule(PathBeneath::new(fd, access))
                .map_err(ContainError::landlock(format!(
                    "add the rule for {}",
                    path.display()
                )))?;
        rules += 1;
    }
    let status: RestrictionStatus = ruleset
        .restrict_self()
        .map_err(ContainError::landlock("enforce the Landlock ruleset"))?;
    Ok(Enforced {
        ruleset: match status.ruleset {
            RulesetStatus::FullyEnforced => "full",
            RulesetStatus::PartiallyEnforced => "partial",
            RulesetStatus::NotEnforced => "none",
        },
        abi: match status.landlock {
            LandlockStatus::Available {
                effective_abi,
                kernel_abi,
            } => kernel_abi.unwrap_or(effective_abi as i32),
            LandlockStatus::NotEnabled | LandlockStatus::NotImplemented => 0,
        },
        no_new_privs: status.no_new_privs,
        rules,
    })
}

/// Restricts this process with a Landlock domain that only scopes signals (nested in the
/// one it is in): what it becomes can no longer signal the process that made the outer one.
/// Nothing where the kernel has no signal scope.
///
/// # Errors
/// The ruleset cannot be made or enforced.
pub fn scope_signals() -> Result<(), crate::ContainError> {
    use crate::ContainError;
    Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .scope(Scope::Signal)
        .and_then(Ruleset::create)
        .and_then(|r| r.restrict_self())
        .map(|_| ())
        .map_err(ContainError::landlock("scope the command's signals"))
}

/// Whether the kernel handles every right of `abi`, asked without restricting anything.
fn handles(abi: ABI) -> bool {
    let fs = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(AccessFs::from_all(abi));
    let scoped = if abi >= ABI::V6 {
        fs.and_then(|r| r.scope(Scope::from_all(abi)))
    } else {
        fs
    };
    scoped.and_then(Ruleset::create).is_ok()
}

/// The newest ABI whose rights this kernel handles (6 for 6 and later: ABI 7 added no right
/// the launcher uses); 0 for none.
pub fn abi() -> i32 {
    [ABI::V6, ABI::V5, ABI::V3, ABI::V2, ABI::V1]
        .into_iter()
        .find(|abi| handles(*abi))
        .map_or(0, |abi| abi as i32)
}

/// What the launcher enforces on this kernel, in words.
pub fn describe(abi: i32) -> String {
    let mut parts = vec![
        "writes only beneath the allowed folders, the temporary folder, declared caches and /dev's terminals".to_owned(),
        "AAI_HOME read-only and its secrets (run/, tokens/, browser/, data.db, *.key) unreadable".to_owned(),
        "a subreaper that outlives `setsid` and double forks".to_owned(),
    ];
    if abi < 2 {
        parts.push("moving files between folders is refused (ABI 2 needed for REFER)".to_owned());
    }
    if abi < 3 {
        parts.push("truncating files is not restricted (ABI 3 needed)".to_owned());
    }
    if abi >= 6 {
        parts.push("no signals to, and no abstract sockets of, processes outside".to_owned());
    } else {
        parts.push("signals and abstract sockets are not scoped (ABI 6 needed): a command may signal the launcher".to_owned());
    }
    parts.push(if namespaces_allowed() {
        "a view of its own (user and mount namespaces): private /tmp, /var/tmp, /dev/shm and runtime folder, the gateway's home and the user's secret stores empty, run-later files in the allowed folders read-only, no session socket (desktop programs: the display and the session bus); a Landlock domain of the command's own, ended at once by the stop".to_owned()
    } else {
        "NO view of its own: this system does not let an ordinary process make user namespaces (kernel.unprivileged_userns_clone, user.max_user_namespaces or AppArmor's userns restriction), so /tmp, the runtime folder and the session's sockets stay in view; Landlock alone keeps the secrets unreadable".to_owned()
    });
    parts.join("; ")
}

/// Set in the gateway's environment, this makes it act as on a kernel without Landlock (for
/// tests of the refusal). It can only make the gateway refuse more: nothing it starts is run
/// with fewer restrictions because of it.
pub const PRETEND_NONE: &str = "AAI_NO_LANDLOCK";

/// Which sandbox applies here.
pub fn support() -> Support {
    if std::env::var_os(PRETEND_NONE).is_some() {
        return Support {
            sandbox: None,
            detail: format!("Landlock is treated as absent ({PRETEND_NONE} is set)"),
        };
    }
    // Asked once: the kernel's ABI does not change while the gateway runs.
    static ABI_HERE: std::sync::OnceLock<i32> = std::sync::OnceLock::new();
    match *ABI_HERE.get_or_init(abi) {
        0 => Support {
            sandbox: None,
            detail: "this kernel has no Landlock (Linux 5.13+ with `landlock` in the lsm= boot list is needed)".to_owned(),
        },
        abi => Support {
            sandbox: Some(format!("Landlock ABI {}{abi}", if abi >= 6 { "≥ " } else { "" })),
            detail: describe(abi),
        },
    }
}

/// Whether this system lets an ordinary process make user namespaces (what the view needs),
/// as far as its settings say without trying.
pub fn namespaces_allowed() -> bool {
    let read = |path: &str| {
        std::fs::read_to_string(path)
            .ok()
            .and_then(|v| v.trim().parse::<i64>().ok())
    };
    read("/proc/sys/user/max_user_namespaces").is_none_or(|n| n > 0)
        && read("/proc/sys/kernel/unprivileged_userns_clone").is_none_or(|n| n != 0)
        && read("/proc/sys/kernel/apparmor_restrict_unprivileged_userns").is_none_or(|n| n == 0)
}
