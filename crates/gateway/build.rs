//! Release builds on x86_64 GNU/Linux pack their relative relocations (DT_RELR): the loader
//! reads ~10 KiB instead of a ~735 KiB table at every start. It needs glibc 2.36 where the
//! binary runs, so it is asked for only when the glibc it is built against has it.

use std::process::Command;

fn main() {
    let var = |name: &str| std::env::var(name).unwrap_or_default();
    if var("PROFILE") != "release"
        || var("TARGET") != "x86_64-unknown-linux-gnu"
        || glibc_minor().is_none_or(|minor| minor < 36)
    {
        return;
    }
    println!("cargo:rustc-link-arg-bin=aai-gateway=-Wl,-z,pack-relative-relocs");
}

/// The minor version of the C library the binary links against (`getconf` prints
/// `glibc 2.36`).
fn glibc_minor() -> Option<u32> {
    let out = Command::new("getconf")
        .arg("GNU_LIBC_VERSION")
        .output()
        .ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    let mut parts = text.trim().strip_prefix("glibc ")?.split('.');
    (parts.next()? == "2").then_some(())?;
    parts.next()?.parse().ok()
}
