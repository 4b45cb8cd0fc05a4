//! Release builds on x86_64 GNU/Linux lay out the code the server runs on every turn
//! (start-up, `tools/list`, guides, calls) next to each other, so the kernel maps fewer pages of
//! the binary: it maps file pages 64 KiB around each page touched, and hot code spread over the
//! whole text section put ~11 MiB of a 19 MiB binary in the resident set. The order is
//! `link-order.txt`, made by `bench/link-order/run.sh`; it is given to LLD, the linker rustc uses
//! by default there since 1.90. Names the build does not have are skipped, so a stale list only
//! orders less. Other targets, older compilers, a linker of one's own, or `AAI_LINK_ORDER=0`:
//! the binary links as usual.

use std::path::Path;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=link-order.txt");
    println!("cargo:rerun-if-env-changed=AAI_LINK_ORDER");
    println!("cargo:rerun-if-env-changed=AAI_LINK_MAP");
    let var = |name: &str| std::env::var(name).unwrap_or_default();
    let release = var("PROFILE") == "release";
    let default_lld = var("TARGET") == "x86_64-unknown-linux-gnu"
        && !var("CARGO_ENCODED_RUSTFLAGS").contains("link")
        && var("RUSTC_LINKER").is_empty()
        && rustc_minor(&var("RUSTC")).is_some_and(|minor| minor >= 90);
    if !release || !default_lld || var("AAI_LINK_ORDER") == "0" {
        return;
    }
    let order = Path::new(&var("CARGO_MANIFEST_DIR")).join("link-order.txt");
    if !order.is_file() {
        return;
    }
    let arg = |text: String| println!("cargo:rustc-link-arg-bin=aai-gateway={text}");
    arg(format!("-Wl,--symbol-ordering-file={}", order.display()));
    arg("-Wl,--no-warn-symbol-ordering".to_owned());
    // Relative relocations packed (DT_RELR): the loader reads ~10 KiB instead of a 735 KiB
    // table at every start. Needs glibc 2.36 where the binary runs, so only when the glibc
    // it is built against has it.
    if glibc_minor().is_some_and(|minor| minor >= 36) {
        arg("-Wl,-z,pack-relative-relocs".to_owned());
    }
    // `bench/link-order/run.sh` reads where each function landed from the linker's map.
    let map = var("AAI_LINK_MAP");
    if !map.is_empty() {
        arg(format!("-Wl,-Map={map}"));
        arg("-Wl,--no-demangle".to_owned());
    }
}

/// The minor version of the C library the binary links against (`getconf` prints
/// `glibc 2.36`).
fn glibc_minor() -> Option<u32> {
    let text = output("getconf", "GNU_LIBC_VERSION")?;
    minor(text.trim().strip_prefix("glibc ")?, "2")
}

/// The minor version of `rustc` (`rustc 1.95.0 (…)` → 95).
fn rustc_minor(rustc: &str) -> Option<u32> {
    let text = output(if rustc.is_empty() { "rustc" } else { rustc }, "--version")?;
    minor(text.split_whitespace().nth(1)?, "1")
}

/// What `program arg` prints.
fn output(program: &str, arg: &str) -> Option<String> {
    let out = Command::new(program).arg(arg).output().ok()?;
    String::from_utf8(out.stdout).ok()
}

/// The minor number of `version` (`major.minor[.…]`) when its major is `major`.
fn minor(version: &str, major: &str) -> Option<u32> {
    let mut parts = version.split('.');
    (parts.next()? == major).then_some(())?;
    parts.next()?.parse().ok()
}
