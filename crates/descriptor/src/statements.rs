//! The exact bytes the app store signs besides descriptors, shared by the registry that makes
//! them and the gateway that checks them. Each is line-based text with a version tag first, so
//! a signature over one kind of statement can never be read as another, and no field can run
//! into the next (keys, digests and numbers hold no newline; ids are checked appIds).

/// What a publisher's old key signs to hand its apps over to a new key.
pub fn key_rotation(publisher: &str, old_key: &str, new_key: &str) -> Vec<u8> {
    format!("aai-key-rotation/v1\npublisher={publisher}\nold={old_key}\nnew={new_key}\n")
        .into_bytes()
}

/// What the registry's timestamp key signs with every descriptor it serves: which bytes of
/// which app, which version is the latest at `issued` (Unix seconds). A copy of this statement
/// ages, so a mirror can hold back updates only as long as a client accepts its age.
pub fn timestamp(app_id: &str, version: &str, sha256: &str, latest: &str, issued: u64) -> Vec<u8> {
    format!(
        "aai-timestamp/v1\napp={app_id}\nversion={version}\nsha256={sha256}\nlatest={latest}\nissued={issued}\n"
    )
    .into_bytes()
}
