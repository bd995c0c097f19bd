//! The `cborgate` command line: parses arguments, then calls the library.

use cborgate::codec::StringMode;
use cborgate::commands::tools::{self, Target, ToolError};
use clap::{CommandFactory, Parser, Subcommand, ValueEnum};
use std::io::{self, IsTerminal, Read};
use std::path::PathBuf;
use std::process::ExitCode;

#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[cfg(feature = "jemalloc")]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc's options, which it reads at its start (`malloc_conf`; an operator's
/// `_RJEM_MALLOC_CONF` still overrides them). A thread's cache is collected after each
/// 4 MiB it allocates rather than each 64 KiB: at the default, collection cost a proxied
/// 7 KB GET about 5,000 instructions of its 118,000 (bench/README.md "Allocator").
#[cfg(feature = "jemalloc")]
#[export_name = "_rjem_malloc_conf"]
pub static MALLOC_CONF: Option<&'static u8> = Some(&b"tcache_gc_incr_bytes:4194304\0"[0]);

#[derive(Parser)]
#[command(
    name = "cborgate",
    version = cborgate::VERSION,
    about = "A negotiating reverse proxy that lets Kubernetes API clients speak CBOR to JSON-only apiservers"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Clone, Copy, ValueEnum)]
enum To {
    Cbor,
    Json,
}

// Parsed once at start-up; the size difference between variants is irrelevant.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand)]
enum Command {
    /// Convert one body (or, with --watch, a watch stream) between JSON and CBOR
    /// with exactly the proxy's rules.
    Transcode {
        /// Output format: `cbor` reads JSON, `json` reads CBOR.
        #[arg(long)]
        to: To,
        /// Treat the input as a watch stream (JSON events or a CBOR Sequence).
        #[arg(long)]
        watch: bool,
        /// How JSON strings are written in CBOR.
        #[arg(long, value_enum, default_value = "bytes")]
        strings: StringMode,
        /// Input file (default: standard input).
        file: Option<PathBuf>,
    },
    /// Print CBOR in RFC 8949 diagnostic notation.
    Diag {
        /// Show byte strings that are valid UTF-8 as 'text', with JSON escapes.
        #[arg(long)]
        text: bool,
        /// Input file (default: standard input).
        file: Option<PathBuf>,
    },
    #[command(flatten)]
    Proxy(cborgate::commands::cli::ProxyCommand),
}

fn open(file: &Option<PathBuf>) -> Result<Box<dyn Read>, ExitCode> {
    match file {
        None => Ok(Box::new(io::stdin().lock())),
        Some(p) => match std::fs::File::open(p) {
            Ok(f) => Ok(Box::new(io::BufReader::new(f))),
            Err(e) => {
                eprintln!("cborgate: cannot open {}: {e}", p.display());
                Err(ExitCode::from(1))
            }
        },
    }
}

fn report(r: Result<(), ToolError>) -> ExitCode {
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("cborgate: {e}");
            ExitCode::from(1)
        }
    }
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => match cborgate::commands::cli::flag_error(&e, &Cli::command()) {
            Some(words) => {
                eprintln!("cborgate: configuration error: {words}");
                return ExitCode::from(2);
            }
            None => e.exit(),
        },
    };
    match cli.command {
        Command::Transcode {
            to,
            watch,
            strings,
            file,
        } => {
            let mut input = match open(&file) {
                Ok(r) => r,
                Err(c) => return c,
            };
            let to = match to {
                To::Cbor => Target::Cbor,
                To::Json => Target::Json,
            };
            let stdout = io::stdout();
            let terminal = stdout.is_terminal();
            let mut out = stdout.lock();
            report(tools::transcode(
                &mut input, &mut out, to, watch, strings, terminal,
            ))
        }
        Command::Diag { text, file } => {
            let mut input = match open(&file) {
                Ok(r) => r,
                Err(c) => return c,
            };
            let stdout = io::stdout();
            let mut out = stdout.lock();
            report(tools::diag(&mut input, &mut out, text))
        }
        Command::Proxy(cmd) => cborgate::commands::cli::run(cmd),
    }
}
