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
use tmux_engine::Error;
use tmux_engine::vocab::Size;

mod cli;
use cli::report::{CliError, EXIT_ERROR, EXIT_RUN_FAILED};

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
    Serve(Box<cli::serve_args::ServeArgs>),
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

/// The program: a terminal's output relay when tmux's `pipe-pane` starts
/// one, else the command line's command, its error printed once.
fn main() -> ExitCode {
    // A terminal's output relay (tmux's `pipe-pane` runs it): before
    // anything else, so it sets up no logging and no runtime: it stays
    // resident for as long as its pane, one per terminal.
    let mut args = std::env::args_os().skip(1);
    let first = args.next();
    // The relay executable's other modes (the exit handshake's wrapper,
    // `__with-parent`), likewise: where no relay binary is installed
    // beside this one, this binary is the relay executable.
    let mut args = tmux_engine::tmux::helper_mode(first.as_deref(), args);
    if first.is_some_and(|a| a == tmux_engine::tmux::RELAY_ARG) {
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
    init_logging();
    let cli = Cli::parse();
    // The long-lived faces run with the engine's allocator settings: a
    // restart of this image before the runtime starts any thread.
    if matches!(cli.command, Command::Serve(_) | Command::Mcp(_)) {
        cli::allocator::restart_tuned();
    }
    let json = cli.global.json;
    match run(cli) {
        Ok(code) => code,
        Err(error) => {
            error.print(json, std::io::stderr());
            ExitCode::from(error.exit)
        }
    }
}

/// Logs go to stderr: unset, errors only and serve's file transfers (each
/// is logged); `TMUX_ENGINE_LOG` takes `tracing` directives.
fn init_logging() {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new(
            std::env::var("TMUX_ENGINE_LOG")
                .ok()
                .filter(|directives| !directives.is_empty())
                .unwrap_or_else(|| format!("error,{}=info", tmux_engine::bridge::TRANSFER_LOG)),
        ))
        .with_writer(std::io::stderr)
        .init();
}

/// Runs `cli`'s command on the one runtime: its exit code, or the error
/// `main` prints.
fn run(cli: Cli) -> Result<ExitCode, CliError> {
    // `run` reports the engine's own failures as 125, apart from its
    // command's statuses.
    let failed = match cli.command {
        Command::Run { .. } => EXIT_RUN_FAILED,
        _ => EXIT_ERROR,
    };
    let runtime = tokio::runtime::Runtime::new().map_err(|e| CliError {
        exit: failed,
        ..Error::io("starting the runtime", e).into()
    })?;
    let result = runtime.block_on(command(cli));
    // Don't wait for detached control clients' tasks.
    runtime.shutdown_timeout(std::time::Duration::from_millis(200));
    result
}

/// The command itself.
async fn command(cli: Cli) -> Result<ExitCode, CliError> {
    let global = &cli.global;
    // Each command locks stdout for itself: `mcp` writes it from its own
    // tasks.
    let stdout = || std::io::stdout().lock();
    let done = |()| ExitCode::SUCCESS;
    match cli.command {
        Command::Decode { stats } => {
            match cli::decode::run_decode(std::io::stdin().lock(), stdout(), stats) {
                // Whoever read stdout stopped (`decode | head`): done.
                Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
                    Err(Error::io("decoding stdin", e).into())
                }
                _ => Ok(ExitCode::SUCCESS),
            }
        }
        Command::Run { size, command } => {
            let opts = cli::run::RunOptions { size, command };
            match cli::run::run(opts, tokio::io::stdout()).await {
                Ok(cli::run::RunEnd::Exited(status) | cli::run::RunEnd::Interrupted(status)) => {
                    Ok(ExitCode::from(u8::try_from(status).unwrap_or(255)))
                }
                // Whoever read stdout stopped (`run ... | head`): the run
                // was still cleaned up; end quietly, as SIGPIPE would.
                Err(Error::Io { source, .. })
                    if source.kind() == std::io::ErrorKind::BrokenPipe =>
                {
                    Ok(ExitCode::from(141))
                }
                Err(e) => Err(CliError {
                    exit: EXIT_RUN_FAILED,
                    ..e.into()
                }),
            }
        }
        Command::Terminal(command) => cli::terminals::run(global, command, &mut stdout())
            .await
            .map(done),
        Command::Mcp(args) => cli::mcp::run(global, args).await.map(done),
        Command::Serve(args) => cli::serve::run(global, *args, &mut stdout())
            .await
            .map(done),
        Command::Link(args) => cli::link::run(global, args, &mut stdout()).await.map(done),
        Command::Upload(args) => cli::files::upload(global, args, &mut stdout())
            .await
            .map(done),
        Command::Download(args) => cli::files::download(global, args, &mut stdout())
            .await
            .map(done),
        Command::Logs(args) => cli::logs::run(global, args, &mut stdout()).await.map(done),
        Command::Service { command } => cli::service::run(global, command, &mut stdout()).map(done),
        Command::Audit { command } => cli::audit::run(global, command, &mut stdout()).map(done),
        Command::Test(args) => {
            let passed = cli::tape::test(args, &mut stdout()).await?;
            // A failure was reported with its tape.
            Ok(if passed {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(EXIT_ERROR)
            })
        }
        Command::Render(args) => {
            cli::tape::render(&args, &mut stdout())?;
            Ok(ExitCode::SUCCESS)
        }
    }
}
