//! The tag every process the gateway starts for a call carries, so that the emergency stop
//! and the cgroups find them all.

/// The environment variable every process the gateway starts for a call carries, with this
/// gateway's [`process_tag`]: descendants inherit it even when they leave the process group
/// or session (`setsid`, a double fork), so the emergency stop finds them all.
pub const TAG_VAR: &str = "AAI_GATEWAY_TAG";

/// This gateway process's tag (its pid and a random part, so a reused pid never matches).
pub fn process_tag() -> &'static str {
    static TAG: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    TAG.get_or_init(|| {
        let mut bytes = [0u8; 8];
        let _ = getrandom::fill(&mut bytes);
        let random: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        format!("{}-{random}", std::process::id())
    })
}
