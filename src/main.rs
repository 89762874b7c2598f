//! The `tessera` command line: parse arguments, run a subcommand, map its result to an exit code
//! (0 success, 1 invalid input or a failed gate, 2 usage error, 128 + N when stopped by signal N).

#![allow(clippy::print_stdout, clippy::print_stderr)]

mod cli;

use clap::Parser;

fn main() {
    let cli = cli::command::Cli::parse();
    let code = match cli::command::run(cli) {
        cli::Exit::Ok => 0,
        cli::Exit::Failed => 1,
        cli::Exit::Usage => 2,
        cli::Exit::Signal(sig) => 128 + sig,
    };
    std::process::exit(code)
}
