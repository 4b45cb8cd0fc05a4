//! `aai-gateway`: the stdio MCP server (default), and the command line in [`cli`].

mod cli;

fn main() -> std::process::ExitCode {
    // The containment launcher runs before anything else starts (no runtime, no logging):
    // it only restricts itself and runs the command.
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if let Some(code) = aai_contain::main_if_launcher(&args) {
        return code;
    }
    if let Ok(exe) = std::env::current_exe() {
        aai_contain::set_launcher(exe);
    }
    cli::main()
}
