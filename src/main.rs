//! The `tmux-engine` command line: argument parsing only; the work is in
//! `cli/`, private to this binary.
//!
//! Exit codes: `0` success; `1` an engine error (printed as
//! `error: CODE: message`, or `{"error":{"code":..,"message":..}}` on
//! stderr with `--json`); `2` bad usage; `4` `wait` timed out (code
//! `TIMEOUT`). `run` exits with its command's status (128 + N when signal N
//! killed it), `125` when the engine itself failed, 130/143 when
//! Ctrl-C/SIGTERM stopped it, and 141 (quietly) when its stdout was closed
//! (`run ... | head`). See `docs/cli.md`.

use std::ffi::OsString;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod cli;
use tmux_engine::vocab::Size;

#[derive(Parser, Debug)]
#[command(
    name = "tmux-engine",
    version,
    about = "Run and drive terminals inside private tmux servers"
)]
struct Cli {
    #[command(flatten)]
    global: cli::args::Global,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Decode a raw `tmux -C` stream on stdin into JSON lines, one per event.
    Decode {
        /// Print one JSON summary (events per kind, output bytes per pane) instead.
        #[arg(long)]
        stats: bool,
    },
    /// Run a command in a private tmux server and stream its output.
    Run {
        /// Pane size as COLSxROWS.
        #[arg(long, default_value = "80x24", value_parser = parse_size)]
        size: Size,
        /// The command and its arguments (run directly, not through a shell).
        #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
        command: Vec<OsString>,
    },
    /// Serve the terminals to AI agents over the Model Context Protocol
    /// (JSON-RPC on stdin/stdout; logs on stderr).
    Mcp(cli::mcp::McpArgs),
    /// Serve the owner's terminals on the web: a JSON API, WebSocket viewers
    /// and a terminal page; prints the URL to open.
    Serve(Box<cli::serve::ServeArgs>),
    /// Print a new one-time sign-in link from a running serve (a second
    /// browser, a phone); --list and --revoke show and end links.
    Link(cli::link::LinkArgs),
    /// Write a local file into a terminal's working directory, through a
    /// running serve (PUT /api/terminals/{t}/files).
    Upload(cli::files::UploadArgs),
    /// Fetch a file from a terminal (PATH relative to its working
    /// directory, or absolute), through a running serve.
    Download(cli::files::DownloadArgs),
    /// Print a terminal's kept history (spawned with --keep-history),
    /// running or gone; --follow keeps printing.
    Logs(cli::logs::LogsArgs),
    /// Install or remove a systemd unit running `serve --keep-history` at
    /// boot (or login, with --user), so terminals come back after a reboot.
    Service {
        #[command(subcommand)]
        command: cli::service::ServiceCommand,
    },
    /// Check an audit log that `serve --audit-log FILE` wrote: names the
    /// first line edited, deleted, inserted or moved.
    Audit {
        #[command(subcommand)]
        command: cli::audit::AuditCommand,
    },
    #[command(flatten)]
    Terminal(cli::args::TerminalCommand),
    /// Run tape files (VHS's commands plus Expect, Snapshot, Wait Stable),
    /// each in its own private terminal, in parallel; exits 1 on a failure.
    Test(cli::tape::TestArgs),
    /// Draw an asciicast recording as an animated GIF or a PNG.
    Render(cli::tape::RenderArgs),
}

/// clap's adapter to [`Size`]'s one parser.
fn parse_size(s: &str) -> Result<Size, String> {
    s.parse().map_err(|e: tmux_engine::Error| e.to_string())
}

/// Runs a command over the registry (`Terminal` verbs, `mcp`) on a fresh
/// runtime and turns its end into the exit code.
fn registry_command<'a, F, Fut>(global: &'a cli::args::Global, command: F) -> ExitCode
where
    F: FnOnce(&'a cli::args::Global) -> Fut,
    Fut: std::future::Future<Output = Result<(), cli::report::CliError>>,
{
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: IO: starting the runtime: {e}");
            return ExitCode::from(cli::report::EXIT_ERROR);
        }
    };
    let result = runtime.block_on(command(global));
    // Don't wait for detached control clients' tasks.
    runtime.shutdown_timeout(std::time::Duration::from_millis(200));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            error.print(global.json, std::io::stderr());
            ExitCode::from(error.exit)
        }
    }
}

fn main() -> ExitCode {
    // A terminal's output relay (tmux's `pipe-pane` runs it): before
    // anything else, so it sets up no logging and no runtime: it stays
    // resident for as long as its pane, one per terminal.
    let mut args = std::env::args_os().skip(1);
    if args
        .next()
        .is_some_and(|a| a == tmux_engine::tmux::RELAY_ARG)
    {
        let dir = args.next().unwrap_or_default();
        let joined = args.next().is_some_and(|a| a == "joined");
        return match tmux_engine::tmux::relay(
            std::path::Path::new(&dir),
            joined,
            &mut tmux_engine::RelayKeeper::default(),
        ) {
            Ok(()) => ExitCode::SUCCESS,
            Err(_) => ExitCode::FAILURE,
        };
    }
    tracing_subscriber::fmt()
        // Unset, errors only, and serve's file transfers (each is logged).
        .with_env_filter(tracing_subscriber::EnvFilter::new(
            std::env::var("TMUX_ENGINE_LOG")
                .ok()
                .filter(|directives| !directives.is_empty())
                .unwrap_or_else(|| format!("error,{}=info", tmux_engine::bridge::TRANSFER_LOG)),
        ))
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    match cli.command {
        Command::Decode { stats } => {
            let stdin = std::io::stdin().lock();
            let stdout = std::io::stdout().lock();
            match cli::decode::run_decode(stdin, stdout, stats) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("error: IO: decoding stdin: {e}");
                    ExitCode::from(1)
                }
            }
        }
        Command::Terminal(command) => registry_command(&cli.global, |global| async move {
            let mut stdout = std::io::stdout().lock();
            cli::terminals::run(global, command, &mut stdout).await
        }),
        Command::Mcp(args) => registry_command(&cli.global, |global| cli::mcp::run(global, args)),
        Command::Serve(args) => registry_command(&cli.global, |global| async move {
            let mut stdout = std::io::stdout().lock();
            cli::serve::run(global, *args, &mut stdout).await
        }),
        Command::Link(args) => registry_command(&cli.global, |global| async move {
            let mut stdout = std::io::stdout().lock();
            cli::link::run(global, args, &mut stdout).await
        }),
        Command::Upload(args) => registry_command(&cli.global, |global| async move {
            let mut stdout = std::io::stdout().lock();
            cli::files::upload(global, args, &mut stdout).await
        }),
        Command::Download(args) => registry_command(&cli.global, |global| async move {
            let mut stdout = std::io::stdout().lock();
            cli::files::download(global, args, &mut stdout).await
        }),
        Command::Test(args) => {
            let runtime = match tokio::runtime::Runtime::new() {
                Ok(rt) => rt,
                Err(e) => {
                    eprintln!("error: IO: starting the runtime: {e}");
                    return ExitCode::from(cli::report::EXIT_ERROR);
                }
            };
            let mut stdout = std::io::stdout().lock();
            let result = runtime.block_on(cli::tape::test(args, &mut stdout));
            runtime.shutdown_timeout(std::time::Duration::from_millis(200));
            match result {
                Ok(true) => ExitCode::SUCCESS,
                Ok(false) => ExitCode::from(cli::report::EXIT_ERROR),
                Err(e) => {
                    cli::report::CliError::from(e).print(cli.global.json, std::io::stderr());
                    ExitCode::from(cli::report::EXIT_ERROR)
                }
            }
        }
        Command::Render(args) => {
            let mut stdout = std::io::stdout().lock();
            match cli::tape::render(&args, &mut stdout) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    cli::report::CliError::from(e).print(cli.global.json, std::io::stderr());
                    ExitCode::from(cli::report::EXIT_ERROR)
                }
            }
        }
        Command::Logs(args) => registry_command(&cli.global, |global| async move {
            let mut stdout = std::io::stdout().lock();
            cli::logs::run(global, args, &mut stdout).await
        }),
        Command::Service { command } => registry_command(&cli.global, |global| async move {
            let mut stdout = std::io::stdout().lock();
            cli::service::run(global, command, &mut stdout)
        }),
        Command::Audit { command } => registry_command(&cli.global, |global| async move {
            let mut stdout = std::io::stdout().lock();
            cli::audit::run(global, command, &mut stdout)
        }),
        Command::Run { size, command } => {
            let runtime = match tokio::runtime::Runtime::new() {
                Ok(rt) => rt,
                Err(e) => {
                    eprintln!("error: IO: starting the runtime: {e}");
                    return ExitCode::from(125);
                }
            };
            let opts = cli::run::RunOptions { size, command };
            match runtime.block_on(cli::run::run(opts, tokio::io::stdout())) {
                Ok(cli::run::RunEnd::Exited(status) | cli::run::RunEnd::Interrupted(status)) => {
                    ExitCode::from(u8::try_from(status).unwrap_or(255))
                }
                // Whoever read stdout stopped (`run ... | head`): the run
                // was still cleaned up; end quietly, as SIGPIPE would.
                Err(tmux_engine::Error::Io { source, .. })
                    if source.kind() == std::io::ErrorKind::BrokenPipe =>
                {
                    ExitCode::from(141)
                }
                Err(e) => {
                    eprintln!("error: {}: {e}", e.code());
                    ExitCode::from(125)
                }
            }
        }
    }
}
