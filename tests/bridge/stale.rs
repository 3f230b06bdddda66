//! A `serve.json` a SIGKILLed serve left behind sent the owner's token
//! (`link`) and a file's bytes (`upload`) to whoever bound the old port
//! next. A second local user, made by the test, binds it; the CLI must
//! send it nothing, name the stale file and remove it. A live serve is
//! asked to prove it holds the key recorded beside its URL before any
//! token goes to it.

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};

use serde_json::Value;

use super::{Served, WAIT};
use crate::support::within;

/// A local user made for one test, deleted on drop.
struct User {
    name: String,
    uid: u32,
    gid: u32,
}

impl User {
    /// A new system user without a home, or why there cannot be one.
    fn create() -> Result<User, String> {
        let name = format!("te46-{}", std::process::id() % 100_000);
        let made = Command::new("useradd")
            .args([
                "--system",
                "--no-create-home",
                "--shell",
                "/usr/sbin/nologin",
            ])
            .arg(&name)
            .output()
            .map_err(|e| format!("useradd: {e}"))?;
        if !made.status.success() {
            return Err(format!(
                "useradd: {}",
                String::from_utf8_lossy(&made.stderr).trim()
            ));
        }
        // Made: from here on, dropping it deletes the user.
        let mut user = User {
            name,
            uid: 0,
            gid: 0,
        };
        let id = |flag: &str, name: &str| -> Result<u32, String> {
            let out = Command::new("id")
                .args([flag, name])
                .output()
                .map_err(|e| e.to_string())?;
            String::from_utf8_lossy(&out.stdout)
                .trim()
                .parse()
                .map_err(|e| format!("id {flag}: {e}"))
        };
        user.uid = id("-u", &user.name)?;
        user.gid = id("-g", &user.name)?;
        Ok(user)
    }
}

impl Drop for User {
    fn drop(&mut self) {
        let _ = Command::new("userdel").arg(&self.name).output();
    }
}

/// The stranger's listener on `port`, as `user`: answers every request
/// `200 {}` and writes what it received to `log`.
fn stranger(user: &User, port: u16, log: &std::path::Path) -> std::process::Child {
    let script = r#"
import socket, sys
port, log = int(sys.argv[1]), sys.argv[2]
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", port))
s.listen(16)
print("ready", flush=True)
s.settimeout(60)
while True:
    c, _ = s.accept()
    c.settimeout(2)
    got = b""
    try:
        while True:
            b = c.recv(65536)
            if not b:
                break
            got += b
            if b"\r\n\r\n" in got:
                c.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}")
    except Exception:
        pass
    with open(log, "ab") as f:
        f.write(got)
    c.close()
"#;
    let mut child = Command::new("/usr/bin/python3")
        .args(["-c", script, &port.to_string()])
        .arg(log)
        .uid(user.uid)
        .gid(user.gid)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3 for the stranger's listener");
    let mut line = String::new();
    BufReader::new(child.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(
        line.trim(),
        "ready",
        "the stranger's listener did not start"
    );
    child
}

/// Kills the listener on drop, even when an assertion fails first.
struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test]
async fn a_stale_serve_json_sends_nothing_to_another_users_listener() {
    within(async {
        // As the tmpfs tests need root for an honest full disk, this one
        // needs it for an honest stranger: a run without it fails, loudly.
        let user = User::create()
            .unwrap_or_else(|why| panic!("a second local user is needed (run as root): {why}"));
        let served = Served::start(&[]).await;
        let token = served.token.clone();
        let port: u16 = served.base.rsplit_once(':').unwrap().1.parse().unwrap();
        let work = tempfile::tempdir().unwrap();
        let found = served.cli.state().join("serve.json");
        // serve records itself before it prints its URL.
        crate::support::poll("serve.json", WAIT, || async {
            std::fs::read_to_string(&found)
                .ok()
                .filter(|text| text.contains(&token))
        })
        .await;
        let cli = served.crash().await;
        let recorded = std::fs::read_to_string(&found).expect("serve.json stays after a SIGKILL");
        // A directory the stranger may write its log into.
        let logs = tempfile::tempdir().unwrap();
        std::fs::set_permissions(
            logs.path(),
            std::os::unix::fs::PermissionsExt::from_mode(0o777),
        )
        .unwrap();
        let log = logs.path().join("received");
        let _listener = Killed(stranger(&user, port, &log));
        let notes = work.path().join("notes.txt");
        std::fs::write(&notes, b"the owner's private notes 4f1c").unwrap();
        let notes_arg = notes.to_string_lossy().into_owned();
        for args in [&["link"][..], &["upload", "t", &notes_arg]] {
            std::fs::write(&found, &recorded).unwrap();
            let out = cli.run(args);
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(
                !out.status.success(),
                "{args:?} reached the stranger: {stderr}"
            );
            assert!(stderr.contains("stale"), "{args:?}: {stderr}");
            assert!(
                stderr.contains(&found.to_string_lossy().into_owned()),
                "{stderr}"
            );
            assert!(!found.exists(), "{args:?}: the stale file is removed");
        }
        let received = std::fs::read(&log).unwrap_or_default();
        let received = String::from_utf8_lossy(&received);
        assert!(
            !received.contains(&token),
            "the token reached the stranger: {received}"
        );
        assert!(!received.contains("4f1c"), "the file reached the stranger");
        assert!(received.is_empty(), "nothing at all is sent: {received}");
    })
    .await;
}

/// A live serve whose file records another proof key (or none) gets no
/// token: the challenge fails before `link` sends one. The true file
/// works.
#[tokio::test]
async fn a_serve_that_cannot_prove_its_key_gets_no_token() {
    within(async {
        let served = Served::start(&[]).await;
        let found = served.cli.state().join("serve.json");
        let recorded: Value = crate::support::poll("serve.json", WAIT, || async {
            let text = std::fs::read_to_string(&found).ok()?;
            serde_json::from_str::<Value>(&text)
                .ok()
                .filter(|v| v["token"] == served.token.as_str())
        })
        .await;
        assert!(recorded["proof"].as_str().is_some_and(|k| k.len() == 64));
        let link = |file: &Value| {
            std::fs::write(&found, file.to_string()).unwrap();
            served.cli.run(&["link"])
        };
        let out = link(&recorded);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let mut wrong = recorded.clone();
        wrong["proof"] = Value::from("ab".repeat(32));
        let mut none = recorded.clone();
        none.as_object_mut().unwrap().remove("proof");
        for file in [wrong, none] {
            let out = link(&file);
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(!out.status.success(), "{file}: {stderr}");
            assert!(stderr.contains("stale"), "{stderr}");
            assert!(!found.exists(), "the stale file is removed");
        }
        // No sign-in link was minted by the refused calls.
        let (status, links) = served.get("/api/links").await;
        assert_eq!(status, 200);
        assert_eq!(links.as_array().unwrap().len(), 2, "{links}");
    })
    .await;
}

/// serve records itself (`serve.json`) before it prints its URL, so a
/// `link` run the moment the URL shows finds it. It used to print first:
/// `bridge::revoked`'s `link --read-only`, run right after, failed once in
/// a loaded 4-thread run.
#[tokio::test]
async fn serve_is_recorded_before_its_url_is_printed() {
    within(async {
        let served = Served::start(&[]).await;
        let found = served.cli.state().join("serve.json");
        let recorded = std::fs::read_to_string(&found).expect("serve.json once the URL shows");
        assert!(recorded.contains(&served.token), "{recorded}");
        let minted = served.cli.run(&["link", "--json"]);
        assert!(
            minted.status.success(),
            "{}",
            String::from_utf8_lossy(&minted.stderr)
        );
    })
    .await;
}
