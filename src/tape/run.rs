//! One try of one tape: its settings, then its commands against a fresh
//! [`Fixture`], stopping at the first failure with the file, the line and
//! the screen at that moment. Waits are the fixture's (they sleep on the
//! screen model's changes up to a deadline); the only sleeps are the
//! tape's own `Sleep` and `TypingSpeed`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use regex::Regex;

use super::check::{self, Failed};
use super::frames::{self, Frames};
use super::parse::{Command, Location, Setting, Step, Tape, WaitFor};
use super::shells;
use super::{Failure, Options};
use crate::fixture::{Fixture, FixtureBuilder};
use crate::picture::{self, GifOptions, Renderer, Style};
use crate::screen::Screen;
use crate::screen::asciicast::Recording;

/// VHS's default `WaitPattern` (`>$`), widened to the fixture's pinned
/// `$ ` prompt and a root `#`.
const WAIT_PATTERN: &str = r"[>$#]\s*$";
/// The default of every wait's and expectation's deadline.
pub(crate) const WAIT_TIMEOUT: Duration = Duration::from_secs(10);

/// What the settings so far say.
struct Config {
    shell: String,
    size: Option<(u16, u16)>,
    pixels: (Option<u32>, Option<u32>),
    env: Vec<(String, String)>,
    style: Style,
    fps: u32,
    typing: Duration,
    timeout: Duration,
    pattern: Regex,
    type_ahead: bool,
}

impl Config {
    fn new() -> Config {
        Config {
            shell: "bash".to_owned(),
            size: None,
            pixels: (None, None),
            env: Vec::new(),
            style: Style::default(),
            fps: 20,
            typing: Duration::ZERO,
            timeout: WAIT_TIMEOUT,
            pattern: Regex::new(WAIT_PATTERN).unwrap_or_else(|_| unreachable!("a valid pattern")),
            type_ahead: false,
        }
    }
}

/// A running try.
struct Run<'a> {
    tape: &'a Tape,
    options: &'a Options,
    config: Config,
    fixture: Option<Fixture>,
    outputs: Vec<PathBuf>,
    clipboard: String,
    /// Notes for the report (snapshots written).
    notes: Vec<String>,
    /// The tape's own directory: `tmux/` is its `TMUX_TMPDIR` (a tmux the
    /// tape starts puts its server there, killed after the tape), `run/`
    /// its `XDG_RUNTIME_DIR`; removed after the tape.
    tmux_tmpdir: Option<tempfile::TempDir>,
    /// The frames of the text outputs, when the tape has one.
    frames: Option<Frames>,
    /// Between `Hide` and `Show`: no frames.
    hidden: bool,
}

/// What a try came to.
pub(crate) struct Tried {
    pub(crate) failure: Option<Failure>,
    pub(crate) notes: Vec<String>,
}

/// Runs one try of `tape`; `dir` is where its artifacts go on failure.
pub(crate) async fn run_once(tape: &Tape, options: &Options, dir: &Path) -> Tried {
    let mut run = Run {
        tape,
        options,
        config: Config::new(),
        fixture: None,
        outputs: Vec::new(),
        clipboard: String::new(),
        notes: Vec::new(),
        tmux_tmpdir: None,
        frames: tape
            .steps
            .iter()
            .any(|s| matches!(&s.command, Command::Output(p) if frames::is_text(p)))
            .then(Frames::default),
        hidden: false,
    };
    let mut failure = None;
    for step in &tape.steps {
        if let Err(failed) = run.step(step).await {
            failure = Some(run.fail(step, failed, dir));
            break;
        }
        run.frame(&step.command).await;
    }
    if failure.is_none()
        && let Err(message) = run.finish().await
    {
        failure = Some(Failure {
            at: None,
            message,
            screen: None,
            artifacts: Vec::new(),
        });
    }
    if let Some(fixture) = run.fixture.take() {
        let _ = fixture.close().await;
    }
    if let Some(dir) = run.tmux_tmpdir.take() {
        kill_nested_servers(&dir.path().join("tmux")).await;
    }
    Tried {
        failure,
        notes: run.notes,
    }
}

impl Run<'_> {
    async fn step(&mut self, step: &Step) -> Result<(), Failed> {
        match &step.command {
            Command::Set(setting) => return self.set(setting),
            Command::Env(key, value) => {
                self.before_start("Env")?;
                self.config.env.push((key.clone(), value.clone()));
                return Ok(());
            }
            Command::Require(program) => {
                return which::which(program)
                    .map(drop)
                    .map_err(|_| Failed::plain(format!("Require: {program} is not on PATH")));
            }
            Command::Output(path) => {
                self.outputs.push(path.clone());
                return Ok(());
            }
            _ => {}
        }
        self.start().await?;
        let Some(fx) = self.fixture.as_ref() else {
            return Err(Failed::plain("the terminal did not start".to_owned()));
        };
        let (timeout, typing) = (self.config.timeout, self.config.typing);
        if matches!(
            step.command,
            Command::Type { .. } | Command::Key { .. } | Command::Paste
        ) && let Some(status) = fx.terminal()?.exit_status()
        {
            // tmux keeps the dead pane and takes the keys without a word.
            return Err(Failed::plain(format!(
                "nothing reads what this types: the program {status}"
            )));
        }
        match &step.command {
            Command::Type { text, speed } => {
                let speed = speed.unwrap_or(typing);
                if speed.is_zero() {
                    fx.send_text(text).await?;
                } else {
                    for c in text.chars() {
                        fx.send_text(c.to_string()).await?;
                        tokio::time::sleep(speed).await;
                    }
                }
            }
            Command::Key { key, count, speed } => {
                for i in 0..*count {
                    if i > 0
                        && let Some(speed) = speed
                    {
                        tokio::time::sleep(*speed).await;
                    }
                    fx.send_keys(&[key.as_str()]).await?;
                }
            }
            Command::Sleep(d) => tokio::time::sleep(*d).await,
            Command::Wait { until, timeout: t } => {
                let within = fx.within(t.unwrap_or(timeout));
                match until {
                    WaitFor::Stable(quiet) => drop(within.wait_for_stable(*quiet).await?),
                    WaitFor::Screen(re) => {
                        let re = re.clone().unwrap_or_else(|| self.config.pattern.clone());
                        drop(within.wait_for_regex(&re).await?);
                    }
                    WaitFor::Line(re) => {
                        let re = re.as_ref().unwrap_or(&self.config.pattern);
                        if let Err(e) = within.wait_for(|s| re.is_match(&cursor_line(s))).await {
                            let now = fx.screen_now();
                            let why =
                                format!("the cursor's line is {:?}, not /{re}/", cursor_line(&now));
                            return Err(check::missed(e, why, t.unwrap_or(timeout)));
                        }
                    }
                }
            }
            Command::Hide => fx.mark(picture::HIDE_MARKER),
            Command::Show => fx.mark(picture::SHOW_MARKER),
            Command::Screenshot(path) => {
                let screen = fx.screen_now();
                write_picture(&screen, &self.config.style, path).map_err(Failed::plain)?;
            }
            Command::Copy(text) => self.clipboard.clone_from(text),
            Command::Paste => fx.send_text(&self.clipboard).await?,
            Command::Expect { check, timeout: t } => {
                check::expect(fx, check, t.unwrap_or(timeout)).await?;
            }
            Command::Snapshot(name) => {
                let dir = self.tape.path.parent().unwrap_or(Path::new("."));
                let note = check::snapshot(
                    fx,
                    &dir.join("__snapshots__"),
                    name,
                    self.options.update,
                    timeout,
                )
                .await?;
                if let Some(note) = note {
                    self.notes.push(format!("{}: {note}", step.at));
                }
            }
            Command::Set(_) | Command::Env(..) | Command::Require(_) | Command::Output(_) => {}
        }
        Ok(())
    }

    /// A text output's frame after `command`, as VHS takes one: after
    /// every command but settings, `Require`, `Output` and `Hide`, while
    /// shown (`Expect`, `Snapshot` are this runner's own and change no
    /// screen: no frame either).
    async fn frame(&mut self, command: &Command) {
        match command {
            Command::Hide => self.hidden = true,
            Command::Show => self.hidden = false,
            _ => {}
        }
        let (Some(frames), Some(fx)) = (self.frames.as_mut(), self.fixture.as_ref()) else {
            return;
        };
        if self.hidden {
            return;
        }
        match command {
            Command::Set(_)
            | Command::Env(..)
            | Command::Require(_)
            | Command::Output(_)
            | Command::Expect { .. }
            | Command::Snapshot(_) => return,
            Command::Type { .. } | Command::Key { .. } | Command::Paste => frames::settle(fx).await,
            _ => {}
        }
        frames.push(&fx.screen_now());
    }

    fn before_start(&self, what: &str) -> Result<(), Failed> {
        if self.fixture.is_some() {
            return Err(Failed::plain(format!(
                "{what} must come before the first command that types, waits or checks"
            )));
        }
        Ok(())
    }

    fn set(&mut self, setting: &Setting) -> Result<(), Failed> {
        if matches!(
            setting,
            Setting::Shell(_)
                | Setting::Width(_)
                | Setting::Height(_)
                | Setting::Size(..)
                | Setting::TypeAhead(_)
        ) {
            self.before_start("Set Shell, Width, Height, Size and TypeAhead")?;
        }
        if let Setting::Shell(shell) = setting {
            // A shell that is not there would start, print "No such file"
            // and let the tape go on against that screen.
            let program = shell.split_whitespace().next().unwrap_or("");
            if which::which(program).is_err() {
                return Err(Failed::plain(format!(
                    "{program:?} is not installed (not on PATH)"
                )));
            }
        }
        let c = &mut self.config;
        match setting {
            Setting::Shell(shell) => c.shell.clone_from(shell),
            Setting::FontSize(px) => c.style.font_size = *px,
            Setting::Width(px) => c.pixels.0 = Some(*px),
            Setting::Height(px) => c.pixels.1 = Some(*px),
            Setting::Size(cols, rows) => c.size = Some((*cols, *rows)),
            Setting::Padding(px) => c.style.padding = *px,
            Setting::LineHeight(h) => c.style.line_height = *h,
            Setting::Framerate(fps) => c.fps = *fps,
            Setting::Theme(theme) => c.style.theme = theme.clone(),
            Setting::TypingSpeed(d) => c.typing = *d,
            Setting::WaitTimeout(d) => c.timeout = *d,
            Setting::WaitPattern(re) => c.pattern = re.clone(),
            Setting::TypeAhead(on) => c.type_ahead = *on,
            Setting::Flaky(_) | Setting::Cosmetic => {}
        }
        Ok(())
    }

    /// Starts the fixture on the first command that needs it.
    async fn start(&mut self) -> Result<(), Failed> {
        if self.fixture.is_none() {
            let base = self
                .options
                .runtime_dir
                .clone()
                .unwrap_or_else(std::env::temp_dir);
            let _ = std::fs::create_dir_all(&base);
            let private = tempfile::Builder::new()
                .prefix("tape-tmux")
                .tempdir_in(&base)
                .map_err(|e| Failed::plain(format!("making the tape's TMUX_TMPDIR: {e}")))?;
            // XDG_RUNTIME_DIR too: fish keeps its runtime files there, else
            // in /tmp/fish.USER, whose owner on the next machine may be
            // another user ("Runtime path not available" on the screen).
            let (tmux_dir, xdg_dir) = (private.path().join("tmux"), private.path().join("run"));
            for dir in [&tmux_dir, &xdg_dir] {
                std::os::unix::fs::DirBuilderExt::mode(&mut std::fs::DirBuilder::new(), 0o700)
                    .create(dir)
                    .map_err(|e| Failed::plain(format!("making {}: {e}", dir.display())))?;
            }
            let builder = self
                .builder()
                .env("TMUX_TMPDIR", tmux_dir.to_string_lossy())
                .env("XDG_RUNTIME_DIR", xdg_dir.to_string_lossy());
            self.tmux_tmpdir = Some(private);
            let fixture = builder.start().await?;
            self.fixture = Some(fixture);
        }
        Ok(())
    }

    fn builder(&self) -> FixtureBuilder {
        let c = &self.config;
        let shell = c.shell.trim();
        let mut builder = shells::builder(shell);
        let (cols, rows) = c.size.unwrap_or_else(|| match c.pixels {
            (None, None) => (80, 24),
            (w, h) => {
                let grid = Renderer::new(c.style.clone()).grid_for(w.unwrap_or(0), h.unwrap_or(0));
                (
                    if w.is_some() { grid.0 } else { 80 },
                    if h.is_some() { grid.1 } else { 24 },
                )
            }
        });
        builder = builder
            .size(cols, rows)
            .timeout(c.timeout)
            .type_ahead(c.type_ahead)
            .artifacts_in(self.options.artifacts_for(self.tape), self.tape.name());
        if let Some(dir) = self
            .tape
            .path
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
        {
            builder = builder.cwd(dir);
        }
        if let Some(dir) = &self.options.runtime_dir {
            builder = builder.runtime_dir(dir);
        }
        for (key, value) in &c.env {
            builder = builder.env(key, value);
        }
        builder
    }

    /// The tape's `Output` files, written once it passed.
    async fn finish(&mut self) -> Result<(), String> {
        if self.outputs.is_empty() {
            return Ok(());
        }
        self.start().await.map_err(|f| f.message)?;
        let Some(fx) = self.fixture.as_ref() else {
            return Ok(());
        };
        // What the program prints last is part of the picture.
        let _ = fx
            .within(Duration::from_secs(2))
            .wait_for_stable(Duration::from_millis(100))
            .await;
        let screen = fx.screen_now();
        let cast = fx.recording().unwrap_or_default();
        for path in &self.outputs {
            let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
            let written = match (ext, &self.frames) {
                ("gif", _) => write_gif(&cast, &self.config, path),
                ("cast", _) => write_file(path, &cast),
                (_, Some(frames)) if frames::is_text(path) => {
                    write_file(path, frames.text().as_bytes())
                }
                _ => write_picture(&screen, &self.config.style, path),
            };
            written.map_err(|e| format!("Output {}: {e}", path.display()))?;
        }
        Ok(())
    }

    /// The failure of `step`, with the screen now and the artifacts.
    fn fail(&self, step: &Step, failed: Failed, dir: &Path) -> Failure {
        let mut failure = Failure {
            at: Some(step.at.clone()),
            message: format!("{}: {}", step.source, failed.message),
            screen: None,
            artifacts: Vec::new(),
        };
        let Some(fx) = &self.fixture else {
            return failure;
        };
        let screen = fx.screen_now();
        if !failed.shows_screen {
            failure.screen = Some(screen.snapshot());
        }
        if let Some(Ok(files)) = fx.write_artifacts() {
            failure.artifacts = files;
        }
        let png = dir.join(format!("{}.png", self.tape.name()));
        if picture::save_png(&screen, &self.config.style, &png).is_ok() {
            failure.artifacts.push(png);
        }
        failure
    }
}

/// The row the cursor is on, without trailing blanks but padded up to the
/// cursor: a prompt `>>> ` waiting for input matches `/>>> $/`.
/// Kills every tmux server whose socket is under `dir` (a tmux started
/// inside the tape daemonizes, out of the pane's process group), so
/// nothing the tape started outlives it.
async fn kill_nested_servers(dir: &Path) {
    let Ok(users) = std::fs::read_dir(dir) else {
        return;
    };
    for user in users.flatten() {
        let Ok(sockets) = std::fs::read_dir(user.path()) else {
            continue;
        };
        for socket in sockets.flatten() {
            let _ = tokio::process::Command::new("tmux")
                .arg("-S")
                .arg(socket.path())
                .arg("kill-server")
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .status()
                .await;
        }
    }
}

fn cursor_line(screen: &Screen) -> String {
    let cursor = screen.cursor();
    let mut line = screen.row(usize::from(cursor.row)).unwrap_or("").to_owned();
    let width = line.chars().count();
    line.extend(std::iter::repeat_n(
        ' ',
        usize::from(cursor.col).saturating_sub(width),
    ));
    line
}

fn write_file(path: &Path, bytes: &[u8]) -> Result<(), String> {
    use std::io::Write as _;
    let mut file = picture::create(path).map_err(|e| e.to_string())?;
    file.write_all(bytes).map_err(|e| e.to_string())
}

/// A screenshot: PNG, or the screen's text for any other extension.
fn write_picture(screen: &Screen, style: &Style, path: &Path) -> Result<(), String> {
    match path.extension().and_then(|e| e.to_str()) {
        Some("png") => picture::save_png(screen, style, path).map_err(|e| e.to_string()),
        _ => {
            let mut text = screen.rows().collect::<Vec<_>>().join("\n");
            text.push('\n');
            write_file(path, text.as_bytes())
        }
    }
}

fn write_gif(cast: &[u8], config: &Config, path: &Path) -> Result<(), String> {
    let text = String::from_utf8_lossy(cast);
    let recording = Recording::parse(&text).map_err(|e| e.to_string())?;
    let options = GifOptions {
        style: config.style.clone(),
        fps: config.fps,
        ..GifOptions::default()
    };
    let file = picture::create(path).map_err(|e| e.to_string())?;
    picture::write_gif(&recording, &options, std::io::BufWriter::new(file))
        .map(drop)
        .map_err(|e| e.to_string())
}

impl Location {
    /// The location as `file:line` relative to `base` when under it.
    pub fn relative_to(&self, base: &Path) -> String {
        let file = self.file.strip_prefix(base).unwrap_or(&self.file);
        format!("{}:{}", file.display(), self.line)
    }
}
