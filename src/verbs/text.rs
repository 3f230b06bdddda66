//! Each verb's answer as a person reads it (the CLI without `--json`),
//! named in the verb table as the verb's `text`: one function per shape of
//! answer, each from the answer's JSON, the same value `--json` prints.
//! Lines end in `\n`; a terminal's own output is written as it came.

use base64::Engine as _;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::registry::{SignalDelivery, TerminalSnapshot};
use crate::{Error, Result};

/// An answer back as its type.
fn typed<T: DeserializeOwned>(answer: Value) -> Result<T> {
    serde_json::from_value(answer)
        .map_err(|e| Error::io("reading the answer", std::io::Error::other(e)))
}

fn line(out: &mut Vec<u8>, text: &str) {
    out.extend_from_slice(text.as_bytes());
    out.push(b'\n');
}

fn str_of<'a>(value: &'a Value, key: &str) -> Option<&'a str> {
    value.get(key).and_then(Value::as_str)
}

fn strings<'a>(value: &'a Value, key: &str) -> impl Iterator<Item = &'a str> {
    value
        .get(key)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|item| item.as_str().unwrap_or(""))
}

/// One terminal in a line, as the CLI prints it: `ID\tNAME\tSTATUS\tPID`
/// (`-` for none).
pub fn terminal_line(snapshot: &TerminalSnapshot) -> String {
    format!(
        "{}\t{}\t{}\t{}",
        snapshot.id,
        snapshot.name.as_deref().unwrap_or("-"),
        snapshot.status,
        snapshot
            .pid
            .map_or_else(|| "-".to_owned(), |pid| pid.to_string()),
    )
}

/// A new terminal: its id.
pub(super) fn id(answer: Value) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    line(&mut out, str_of(&answer, "id").unwrap_or(""));
    Ok(out)
}

/// Terminals: one summary line each.
pub(super) fn snapshots(answer: Value) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    for snapshot in typed::<Vec<TerminalSnapshot>>(answer)? {
        line(&mut out, &terminal_line(&snapshot));
    }
    Ok(out)
}

/// A terminal: its summary line.
pub(super) fn snapshot(answer: Value) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    line(&mut out, &terminal_line(&typed(answer)?));
    Ok(out)
}

/// A terminal shown: its summary line, then whether sends get exit codes.
pub(super) fn shown(answer: Value) -> Result<Vec<u8>> {
    let integration = str_of(&answer, "shell_integration")
        .unwrap_or("-")
        .to_owned();
    let mut out = Vec::new();
    let summary = terminal_line(&typed(answer)?);
    line(
        &mut out,
        &format!("{summary}\tshell_integration={integration}"),
    );
    Ok(out)
}

/// A send's output as the terminal showed it, ending in a newline.
pub(super) fn output(answer: Value) -> Result<Vec<u8>> {
    let output = str_of(&answer, "output").unwrap_or("");
    let mut out = output.as_bytes().to_vec();
    if !output.is_empty() && !output.ends_with('\n') {
        out.push(b'\n');
    }
    Ok(out)
}

/// A read: its lines, its text, or its bytes exactly.
pub(super) fn page(answer: Value) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    for text in strings(&answer, "lines") {
        line(&mut out, text);
    }
    if let Some(text) = str_of(&answer, "text") {
        out.extend_from_slice(text.as_bytes());
    }
    if let Some(encoded) = str_of(&answer, "bytes") {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(encoded)
            .map_err(|e| Error::io("decoding the output", std::io::Error::other(e)))?;
        out.extend_from_slice(&bytes);
    }
    Ok(out)
}

/// Search matches as grep prints them: `WHO:LINE:TEXT`, context as
/// `WHO-TEXT`.
pub(super) fn matches(answer: Value) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    for found in answer
        .get("matches")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let who = str_of(found, "name")
            .or_else(|| str_of(found, "terminal"))
            .unwrap_or("");
        for text in strings(found, "before") {
            line(&mut out, &format!("{who}-{text}"));
        }
        let number = found.get("line").map_or_else(String::new, Value::to_string);
        let text = str_of(found, "text").unwrap_or("");
        line(&mut out, &format!("{who}:{number}:{text}"));
        for text in strings(found, "after") {
            line(&mut out, &format!("{who}-{text}"));
        }
    }
    Ok(out)
}

/// Commands: `ID\tSTATE\tCODE\tTEXT` each, then what is unknown.
pub(super) fn commands(answer: Value) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    for command in answer
        .get("commands")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let code = command
            .get("exit_code")
            .filter(|code| !code.is_null())
            .map_or_else(|| "-".to_owned(), Value::to_string);
        let state = if command["running"] == true {
            "running"
        } else {
            "ended"
        };
        let text = str_of(command, "text").unwrap_or("");
        let id = str_of(command, "id").unwrap_or("");
        line(&mut out, &format!("{id}\t{state}\t{code}\t{text}"));
    }
    let unknown = answer["unknown_ended"].as_u64().unwrap_or(0);
    if unknown > 0 {
        let from = str_of(&answer, "known_from").unwrap_or("");
        line(
            &mut out,
            &format!("({unknown} earlier commands ended before {from}: nothing known of them)"),
        );
    }
    Ok(out)
}

/// A screen: its lines.
pub(super) fn lines(answer: Value) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    for text in strings(&answer, "lines") {
        line(&mut out, text);
    }
    Ok(out)
}

/// A wait's end: the command's output as it came, else the line matched.
pub(super) fn found(answer: Value) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    match str_of(&answer, "output") {
        Some(output) => out.extend_from_slice(output.as_bytes()),
        None => line(&mut out, str_of(&answer, "matched").unwrap_or("")),
    }
    Ok(out)
}

/// A signal delivered: `SIGNAL -> process group PGID`.
pub(super) fn delivery(answer: Value) -> Result<Vec<u8>> {
    let delivery = typed::<SignalDelivery>(answer)?;
    let mut out = Vec::new();
    line(
        &mut out,
        &format!("{} -> process group {}", delivery.signal, delivery.pgid),
    );
    Ok(out)
}

/// A kill: done by this call, or joined one under way.
pub(super) fn killed(answer: Value) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    if answer["killed"] == true {
        line(&mut out, "killed");
    } else {
        line(&mut out, "joined a kill in flight");
    }
    Ok(out)
}
