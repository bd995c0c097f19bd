//! The long-running commands `serve` and `demo` (arguments and start-up).

use clap::Subcommand;
use std::process::ExitCode;

#[derive(Subcommand)]
pub enum ProxyCommand {
    /// Run the proxy.
    Serve,
    /// Start the built-in JSON-only apiserver stand-in with the proxy in front of it.
    Demo,
}

pub fn run(cmd: ProxyCommand) -> ExitCode {
    match cmd {
        ProxyCommand::Serve | ProxyCommand::Demo => {
            eprintln!("cborgate: not implemented yet");
            ExitCode::from(1)
        }
    }
}
