//! Each request's one set of rules: what is refused, and with which message.

use super::*;
use crate::registry::{RestartPolicy, SpawnSpec};

fn spawn(value: serde_json::Value) -> Result<SpawnSpec> {
    serde_json::from_value::<SpawnRequest>(value)
        .unwrap()
        .validate()
}

#[test]
fn spawn_rules_are_one_set() {
    let refused = [
        serde_json::json!({"cwd": "relative"}),
        serde_json::json!({"cols": 100}),
        serde_json::json!({"rows": 10}),
        serde_json::json!({"command": []}),
        serde_json::json!({"command": [""]}),
        serde_json::json!({"shell": ""}),
        serde_json::json!({"name": "t-1a2308edac7-b10a309c95b89d50"}),
        serde_json::json!({"cols": 0, "rows": 10}),
        serde_json::json!({"command": ["a"], "shell": "b"}),
        serde_json::json!({"history_limit": 1_000_001}),
    ];
    for value in refused {
        let error = spawn(value.clone()).unwrap_err();
        assert_eq!(error.code(), "INVALID_INPUT", "{value}");
    }
    assert!(
        spawn(serde_json::json!({"cwd": "relative"}))
            .unwrap_err()
            .to_string()
            .contains("cwd")
    );
    let spec = spawn(serde_json::json!({
        "name": "repl", "command": ["python3"], "cols": 100, "rows": 30,
        "restart": "on-attach", "env": {"A": "1"}, "cwd": "/tmp", "role": "repl"
    }))
    .unwrap();
    assert_eq!(
        spec.size,
        Some(crate::vocab::Size {
            cols: 100,
            rows: 30
        })
    );
    assert_eq!(spec.restart, RestartPolicy::OnAttach);
    assert_eq!(spec.command, ["python3"]);
    assert_eq!(spec.env.get("A").map(String::as_str), Some("1"));
    assert_eq!(spawn(serde_json::json!({})).unwrap(), SpawnSpec::default());
}

#[test]
fn wait_takes_exactly_one_condition() {
    let wait = |text: Option<&str>, regex: Option<&str>, exit: Option<bool>| WaitRequest {
        terminal: "t".to_owned(),
        text: text.map(str::to_owned),
        regex: regex.map(str::to_owned),
        exit,
        command: None,
        since: None,
        timeout_secs: None,
    };
    let cases = [
        (wait(Some("a"), None, None), Some("text")),
        (wait(None, Some("a+"), None), Some("regex")),
        (wait(None, None, Some(true)), Some("exit")),
        (wait(None, None, None), None),
        (wait(None, None, Some(false)), None),
        (wait(Some("a"), Some("b"), None), None),
        (wait(Some("a"), None, Some(true)), None),
        (wait(None, Some("("), None), None),
    ];
    for (args, want) in cases {
        let got = args.validate().ok().map(|(c, _)| match c {
            WaitCondition::Text(_) => "text",
            WaitCondition::Regex(_) => "regex",
            _ => "exit",
        });
        assert_eq!(got, want, "{args:?}");
    }
}

#[test]
fn unknown_fields_and_bad_values_are_refused() {
    for bad in [
        serde_json::json!({"terminal": "t", "text": "x", "wait": "forever"}),
        serde_json::json!({"terminal": "t", "text": "x", "sumbit": true}),
        serde_json::json!({"text": "x"}),
    ] {
        assert!(
            serde_json::from_value::<SendRequest>(bad.clone()).is_err(),
            "{bad}"
        );
    }
    let send: SendRequest =
        serde_json::from_value(serde_json::json!({"terminal": "t", "text": "x", "timeout": 2.5}))
            .unwrap();
    assert_eq!(send.timeout_secs, Some(2.5));
    let request = send.clone().validate().unwrap();
    assert_eq!(request.wait, WaitFor::Command);
    assert!(!request.submit);
    let negative = SendRequest {
        timeout_secs: Some(-1.0),
        ..send
    };
    assert_eq!(negative.validate().unwrap_err().code(), "INVALID_INPUT");
}

#[test]
fn read_count_is_bounded() {
    let read = |count| ReadRequest {
        terminal: "t".to_owned(),
        count,
        ..ReadRequest::default()
    };
    assert_eq!(read(None).validate().unwrap().count, None);
    assert_eq!(
        read(Some(MAX_READ_LINES)).validate().unwrap().count,
        Some(MAX_READ_LINES)
    );
    let error = read(Some(MAX_READ_LINES + 1)).validate().unwrap_err();
    assert_eq!(error.code(), "INVALID_INPUT");
    assert!(error.to_string().contains("count"), "{error}");
}
