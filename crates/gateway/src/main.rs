//! `aai-gateway`: the stdio MCP server (default), and the command line in [`cli`].

mod cli;

fn main() -> std::process::ExitCode {
    cli::main()
}
