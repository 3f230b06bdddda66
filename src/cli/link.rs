//! `link`: a new one-time sign-in link from a running `serve` (a second
//! browser, a phone), minted through its API (`POST /api/links`) with the
//! owner's token; `--list` and `--revoke` show and end links. The serve
//! is found through the file it writes in the state directory
//! (`serve.json`, 0600: its URL and, for a single-token serve, the token)
//! unless `--url` and `$TMUX_ENGINE_TOKEN` say otherwise. One plain HTTP/1.1
//! request over TCP or a Unix socket (hyper's client); no TLS. Finding
//! and proving that serve, and the request itself, are `serve_api.rs`'s
//! (which `files` uses too).

use std::io::Write;

use axum::body::Body;
use clap::Args;
use serde_json::{Value, json};
use tmux_engine::Error;

use super::args::Global;
use super::report::{CliError, write_line};
use super::serve_api::{Serve, Target, find_serve, send};

/// `link`'s flags.
#[derive(Args, Debug, Clone)]
pub(crate) struct LinkArgs {
    /// Whoever signs in with the link may only look.
    #[arg(long)]
    read_only: bool,
    /// How long the link's code works: 90s, 10m, 2h, 1d [default: 10m].
    #[arg(long, value_name = "DUR", value_parser = parse_duration)]
    expires: Option<u64>,
    /// A share link for this one terminal (id or name): its holder sees
    /// and touches only it, and its session ends when the link expires.
    #[arg(long, value_name = "T")]
    terminal: Option<String>,
    /// With --terminal: its holder may also move files in and out of the
    /// terminal's working directory (upload, download); without it a
    /// share link moves none.
    #[arg(long, requires = "terminal")]
    files: bool,
    /// List the owner's links instead.
    #[arg(long, conflicts_with_all = ["revoke", "read_only", "expires", "terminal", "files"])]
    list: bool,
    /// Revoke link ID (its code stops working, its sessions end).
    #[arg(long, value_name = "ID", conflicts_with_all = ["read_only", "expires", "terminal", "files"])]
    revoke: Option<String>,
    /// The serve: `http://HOST:PORT[/BASE]` or `unix:PATH[ /BASE]`
    /// [default: the one that last started on the state directory].
    #[arg(long, value_name = "URL")]
    url: Option<String>,
    /// The Host header to send over a Unix socket (one of serve's
    /// --allow-host names) [default: the one serve recorded].
    #[arg(long, value_name = "NAME")]
    host: Option<String>,
}

/// `90`, `90s`, `10m`, `2h`, `1d` as seconds.
fn parse_duration(text: &str) -> Result<u64, String> {
    let (number, unit) = match text.find(|c: char| !c.is_ascii_digit()) {
        Some(at) => text.split_at(at),
        None => (text, "s"),
    };
    let scale = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => return Err(format!("{text:?}: expected a number with s, m, h or d")),
    };
    number
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(scale))
        .filter(|&n| n > 0)
        .ok_or_else(|| format!("{text:?}: expected a positive number with s, m, h or d"))
}

/// One request; the status and JSON answer.
async fn request(
    target: &Target,
    host: Option<&str>,
    token: &str,
    method: &str,
    path: &str,
    body: Option<Value>,
) -> Result<(u16, Value), Error> {
    let content = body.as_ref().map(|_| ("application/json", None));
    let body = Body::from(body.map(|b| b.to_string()).unwrap_or_default());
    let response = send(target, host, token, (method, path), body, content).await?;
    let status = response.status().as_u16();
    let bytes = axum::body::to_bytes(Body::new(response.into_body()), 1 << 20)
        .await
        .map_err(|e| Error::io("reading serve's answer", std::io::Error::other(e)))?;
    let value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    Ok((status, value))
}

/// Mints, lists or revokes.
///
/// # Errors
/// `INVALID_INPUT` without a serve to ask or a token; `UNSUPPORTED` for
/// `https`; the serve's refusal (its code and message);
/// `IO` when it cannot be reached.
pub(crate) async fn run(
    global: &Global,
    args: LinkArgs,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let Serve {
        target,
        token,
        host,
    } = find_serve(global, args.url.clone(), args.host.clone()).await?;
    let (method, path, body) = match (&args.revoke, args.list) {
        (Some(id), _) => ("DELETE", format!("/api/links/{id}"), None),
        (None, true) => ("GET", "/api/links".to_owned(), None),
        (None, false) => {
            let mut body = json!({"read_only": args.read_only});
            if let Some(expires) = args.expires {
                body["expires"] = Value::from(expires);
            }
            if let Some(terminal) = &args.terminal {
                body["terminal"] = Value::from(terminal.clone());
            }
            if args.files {
                body["files"] = Value::from(true);
            }
            ("POST", "/api/links".to_owned(), Some(body))
        }
    };
    let (status, answer) = request(&target, host.as_deref(), &token, method, &path, body).await?;
    if !(200..300).contains(&status) {
        let code = answer["error"]["code"].as_str().unwrap_or("IO");
        let message = answer["error"]["message"]
            .as_str()
            .map_or_else(|| format!("serve answered {status}"), str::to_owned);
        return Err(CliError {
            code: leak_code(code),
            message,
            exit: super::report::EXIT_ERROR,
        });
    }
    if args.list {
        if global.json {
            return Ok(write_line(out, &answer.to_string())?);
        }
        for link in answer.as_array().into_iter().flatten() {
            write_line(
                out,
                &format!(
                    "{} {} {} expires_at={} sessions={}",
                    link["id"].as_str().unwrap_or(""),
                    if link["used"] == true {
                        "used"
                    } else {
                        "unused"
                    },
                    if link["read_only"] == true {
                        "read-only"
                    } else {
                        "read-write"
                    },
                    link["expires_at"],
                    link["sessions"]
                ),
            )?;
        }
        return Ok(());
    }
    if args.revoke.is_some() {
        return Ok(write_line(
            out,
            &if global.json {
                answer.to_string()
            } else {
                format!("revoked {}", answer["revoked"].as_str().unwrap_or(""))
            },
        )?);
    }
    let path = answer["path"].as_str().unwrap_or("/");
    let link = match &target {
        Target::Tcp { authority, base } => format!("http://{authority}{base}{path}"),
        Target::Unix { path: socket, base } => format!("unix:{} {base}{path}", socket.display()),
    };
    if global.json {
        let mut answer = answer;
        answer["url"] = Value::from(link);
        return Ok(write_line(out, &answer.to_string())?);
    }
    Ok(write_line(out, &link)?)
}

/// The serve's error code as one of the engine's stable codes (a code
/// this binary does not know is reported as `IO`).
fn leak_code(code: &str) -> &'static str {
    match code {
        "UNAUTHORIZED" => "UNAUTHORIZED",
        "READ_ONLY" => "READ_ONLY",
        "INVALID_INPUT" => "INVALID_INPUT",
        "NO_TERMINAL" => "NO_TERMINAL",
        "FORBIDDEN_ORIGIN" => "FORBIDDEN_ORIGIN",
        _ => "IO",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("90"), Ok(90));
        assert_eq!(parse_duration("10m"), Ok(600));
        assert_eq!(parse_duration("2h"), Ok(7200));
        assert_eq!(parse_duration("1d"), Ok(86_400));
        for bad in ["", "0", "m", "10x", "-1", "1.5h"] {
            assert!(parse_duration(bad).is_err(), "{bad:?}");
        }
    }
}
