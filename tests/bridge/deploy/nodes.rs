//! Many hosts behind one front door: three serves (`--node a|b|c`), each
//! on its own Unix socket, behind one real nginx running the README's
//! "Run many hosts" recipe. Through the proxy, on each node: spawn, attach,
//! resume (by the id's route) and kill (by the id's route), a list by the
//! `X-Tmux-Engine-Node` header; the page at node a lists and opens every
//! node's terminals; node b killed, the page and the API say it is
//! unreachable within 2 s while a and c keep working.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::Serve;
use super::nginx::{Nginx, nginx_binary};
use crate::bridge::browser::{Browser, chromium_required};
use crate::bridge::{Received, Ws, ws_request};
use crate::cli::Cli;
use crate::support::within;

const NODES: [&str; 3] = ["a", "b", "c"];

/// The README's recipe ("Run many hosts"): one upstream per node, the
/// node by its path prefix under `/nodes/`, by the terminal id's prefix or
/// the `X-Tmux-Engine-Node` header under `/api/`, and a JSON 502 for a
/// node that does not answer.
fn recipe(sockets: &[(&str, &Path)]) -> String {
    let upstreams: String = sockets
        .iter()
        .map(|(node, socket)| {
            format!(
                "    upstream te-{node} {{ server unix:{}; }}\n",
                socket.display()
            )
        })
        .collect();
    format!(
        r#"
{upstreams}
    map $uri $te_path_node {{
        ~^/nodes/(?<node>[a-z0-9-]+)/ $node;
    }}
    map $uri $te_id_node {{
        ~^/api/terminals/(?<node>[a-z0-9-]+)\. $node;
    }}
    map "$te_id_node:$http_x_tmux_engine_node" $te_api_node {{
        ~^(?<node>[a-z0-9-]+): $node;
        ~^:(?<node>[a-z0-9-]+)$ $node;
    }}
    map $http_upgrade $connection_upgrade {{
        default upgrade;
        ''      close;
    }}
"#
    )
}

/// The `server` block's inside of the recipe.
const SERVER: &str = r#"
        proxy_http_version 1.1;
        proxy_set_header Host $http_host;
        proxy_set_header Upgrade $http_upgrade;
        proxy_set_header Connection $connection_upgrade;
        proxy_read_timeout 1h;
        proxy_buffering off;
        proxy_connect_timeout 2s;
        error_page 502 504 = @unreachable;

        location /nodes/ {
            proxy_pass http://te-$te_path_node;
        }
        location /api/ {
            set $node $te_api_node;
            if ($node = "") {
                return 400 '{"error":{"code":"INVALID_INPUT","message":"name the node: an id NODE.t-... or X-Tmux-Engine-Node"}}';
            }
            rewrite ^ /nodes/$node$uri break;
            proxy_pass http://te-$node;
        }
        location @unreachable {
            default_type application/json;
            return 502 '{"error":{"code":"NODE_UNREACHABLE","message":"this node does not answer"}}';
        }
"#;

fn config(dir: &Path, port: u16, sockets: &[(&str, &Path)]) -> String {
    let user = if rustix::process::geteuid().is_root() {
        "user root root;"
    } else {
        ""
    };
    let d = dir.display();
    format!(
        r#"{user}
master_process off;
pid {d}/nginx.pid;
error_log {d}/error.log info;
events {{ worker_connections 256; }}
http {{
    access_log {d}/access.log;
    client_body_temp_path {d}/body;
    proxy_temp_path {d}/proxy;
    fastcgi_temp_path {d}/fastcgi;
    uwsgi_temp_path {d}/uwsgi;
    scgi_temp_path {d}/scgi;
    {maps}
    server {{
        listen 127.0.0.1:{port};
        {SERVER}
    }}
}}
"#,
        maps = recipe(sockets)
    )
}

/// The nodes' shared token (a deployment's secret, or an SSO proxy's
/// user header: either reaches every node).
const TOKEN: &str = "nodes0123456789abcdef0123456789abcdef";

struct Front {
    host: String,
    client: reqwest::Client,
}

impl Front {
    async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
        node_header: Option<&str>,
    ) -> (u16, Value) {
        let mut request = self
            .client
            .request(method, format!("http://{}{path}", self.host))
            .bearer_auth(TOKEN);
        if let Some(node) = node_header {
            request = request.header("x-tmux-engine-node", node);
        }
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = tokio::time::timeout(super::super::WAIT, request.send())
            .await
            .expect("no answer in time")
            .unwrap();
        let status = response.status().as_u16();
        let text = response.text().await.unwrap();
        (
            status,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        )
    }

    async fn ws(&self, path: &str) -> Ws {
        Ws::connect(ws_request(&format!("ws://{}{path}", self.host), TOKEN)).await
    }
}

/// The stream cursor of a hello and the bytes after it.
async fn attach_and_type(front: &Front, node: &str, id: &str) -> (String, u64) {
    let mut ws = front
        .ws(&format!("/nodes/{node}/api/terminals/{id}/attach"))
        .await;
    let hello = ws.text().await;
    assert_eq!(hello["type"], "hello", "{hello}");
    assert_eq!(hello["id"], id, "the hello names the node too: {hello}");
    let mut received = Received::default();
    received.until(&mut ws, &format!("ready-{node}")).await;
    ws.input(format!("one-{node}\n").as_bytes()).await;
    received
        .until(&mut ws, &format!("one-{node}\r\none-{node}"))
        .await;
    ws.close().await;
    (
        hello["stream"].as_str().unwrap().to_owned(),
        received.offset,
    )
}

#[tokio::test]
async fn three_nodes_behind_one_nginx() {
    let nginx = nginx_binary().expect("nginx is not installed: run scripts/install-deps");
    let chromium = chromium_required();
    within(async {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let host = format!("127.0.0.1:{port}");
        let mut serves = Vec::new();
        let mut sockets = Vec::new();
        for node in NODES {
            let cli = Cli::new();
            let socket = cli.state().with_file_name(format!("{node}.sock"));
            let mut args = vec![
                "--listen".to_owned(),
                format!("unix:{}", socket.display()),
                "--base-path".to_owned(),
                format!("/nodes/{node}"),
                "--node".to_owned(),
                node.to_owned(),
                "--allow-host".to_owned(),
                host.clone(),
                "--allow-origin".to_owned(),
                format!("http://{host}"),
                "--pool".to_owned(),
                "0".to_owned(),
            ];
            for peer in NODES.iter().filter(|peer| **peer != node) {
                args.push("--peer-node".to_owned());
                args.push(format!("{peer}=/nodes/{peer}/"));
            }
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let serve = Serve::start(cli, &args, &[("TMUX_ENGINE_TOKEN", TOKEN)]).await;
            // The printed line: the socket, then the link, carrying the node.
            assert!(
                serve
                    .line
                    .contains(&format!(" /nodes/{node}/#code=")),
                "{}",
                serve.line
            );
            assert!(serve.line.ends_with(&format!("&node={node}")), "{}", serve.line);
            sockets.push(socket);
            serves.push(Some(serve));
        }
        // In the first node's test directory: removed with it, even on a panic.
        let root = serves[0].as_ref().unwrap().cli.state().with_file_name("nginx");
        std::fs::create_dir_all(&root).unwrap();
        let named: Vec<(&str, &Path)> = NODES
            .iter()
            .copied()
            .zip(sockets.iter().map(|s| s.as_path()))
            .collect();
        let conf = root.join("nginx.conf");
        std::fs::write(&conf, config(&root, port, &named)).unwrap();
        let _nginx = Nginx::start(&nginx, &root, &conf, &host).await;
        let front = Front {
            host: host.clone(),
            client: reqwest::Client::new(),
        };
        use reqwest::Method;

        // Spawn, attach, resume and kill on each node, through the proxy.
        let mut kept = Vec::new();
        for node in NODES {
            let spawn = |name: &str| {
                json!({"name": name, "command": ["sh", "-c", format!("echo ready-{node}; exec cat")]})
            };
            let (status, spawned) = front
                .call(Method::POST, &format!("/nodes/{node}/api/terminals"), Some(spawn("w")), None)
                .await;
            assert_eq!(status, 201, "{spawned}\n{}", error_log(&root));
            let id = spawned["id"].as_str().unwrap().to_owned();
            assert!(id.starts_with(&format!("{node}.t-")), "{id}");
            let (stream, offset) = attach_and_type(&front, node, &id).await;
            // Typed while nobody watches, by the id's route at the root.
            let (status, sent) = front
                .call(
                    Method::POST,
                    &format!("/api/terminals/{id}/send"),
                    Some(json!({"text": format!("two-{node}"), "submit": true, "wait": "none"})),
                    None,
                )
                .await;
            assert_eq!(status, 200, "{sent}");
            // Resumed by the id's route: exactly what was missed.
            let mut ws = front
                .ws(&format!("/api/terminals/{id}/attach?since={stream}:{offset}"))
                .await;
            let hello = ws.text().await;
            assert_eq!(hello["offset"], offset, "a resume, not a snapshot: {hello}");
            let mut received = Received {
                offset,
                start: offset,
                ..Received::default()
            };
            received.until(&mut ws, &format!("two-{node}\r\ntwo-{node}")).await;
            let missed = String::from_utf8_lossy(&received.bytes).into_owned();
            assert!(received.repaint.is_empty(), "no snapshot: {missed:?}");
            assert!(!missed.contains("one-"), "nothing twice: {missed:?}");
            ws.close().await;
            // Listed by the header's route.
            let (status, listed) = front
                .call(Method::GET, "/api/terminals", None, Some(node))
                .await;
            assert_eq!(status, 200, "{listed}");
            assert!(
                listed.as_array().unwrap().iter().any(|t| t["id"] == id.as_str()),
                "{listed}"
            );
            let (status, killed) = front
                .call(Method::DELETE, &format!("/api/terminals/{id}"), None, None)
                .await;
            assert_eq!((status, &killed["killed"]), (200, &json!(true)), "{killed}");
            let (_, spawned) = front
                .call(Method::POST, &format!("/nodes/{node}/api/terminals"), Some(spawn("k")), None)
                .await;
            kept.push(spawned["id"].as_str().unwrap().to_owned());
        }
        // A node's id sent to another node is no terminal there.
        let (status, wrong) = front
            .call(Method::GET, &format!("/nodes/a/api/terminals/{}", kept[1]), None, None)
            .await;
        assert_eq!((status, &wrong["error"]["code"]), (404, &json!("NO_TERMINAL")), "{wrong}");
        // A share link of a node's terminal, named by its id: the link
        // carries the node, its terminal the node's id.
        let (status, shared) = front
            .call(
                Method::POST,
                "/nodes/a/api/links",
                Some(json!({"terminal": kept[0], "read_only": true})),
                None,
            )
            .await;
        assert_eq!(status, 201, "{shared}");
        assert_eq!(shared["terminal"], kept[0].as_str(), "{shared}");
        assert!(shared["path"].as_str().unwrap().ends_with("&node=a"), "{shared}");

        // The page at node a, signed in there and (by their links) at b and c.
        let link = |serve: &Option<Serve>| {
            let line = &serve.as_ref().unwrap().line;
            line.split_once(' ').unwrap().1.to_owned()
        };
        let mut browser = Browser::open(&chromium, &format!("http://{host}{}", link(&serves[0]))).await;
        browser
            .until("signed in at a", "typeof tmuxEngine === 'object' && tmuxEngine.signedIn === true")
            .await;
        for (index, node) in [(1, "b"), (2, "c")] {
            let fragment = link(&serves[index]).split_once('#').unwrap().1.to_owned();
            browser.eval(&format!("location.hash = '#{fragment}'")).await;
            browser
                .until(
                    &format!("a session for {node}"),
                    &format!(
                        "typeof tmuxEngine === 'object' && tmuxEngine.signedIn === true && \
                         localStorage.getItem('tmux-engine.session:/nodes/{node}/') !== null"
                    ),
                )
                .await;
        }
        browser
            .until(
                "every node's terminal listed",
                "['a','b','c'].every((n) => document.querySelector(`#terminals li[data-node=\"${n}\"]`))",
            )
            .await;
        // Open node c's terminal from node a's page and type into it.
        browser
            .eval("document.querySelector('#terminals li[data-node=\"c\"]').click()")
            .await;
        browser
            .until("c's terminal open", "tmuxEngine.id && tmuxEngine.id.startsWith('c.') && tmuxEngine.socket !== null && document.getElementById('status').textContent === 'connected'")
            .await;
        browser.until_focused().await;
        browser.type_line("from-the-page").await;
        browser.line("from-the-page").await;
        let (_, read) = front
            .call(Method::GET, &format!("/api/terminals/{}/scrollback?offset=0&count=50", kept[2]), None, None)
            .await;
        assert!(read.to_string().contains("from-the-page"), "{read}");

        // Node b dies: the API and the page say so within 2 s.
        drop(serves[1].take());
        let killed = Instant::now();
        let api_said = loop {
            let (status, answer) = front
                .call(Method::GET, "/nodes/b/api/terminals", None, None)
                .await;
            if status == 502 {
                assert_eq!(answer["error"]["code"], "NODE_UNREACHABLE", "{answer}");
                break killed.elapsed();
            }
            assert!(killed.elapsed() < super::super::WAIT, "node b still answers");
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        let (status, answer) = front
            .call(Method::GET, &format!("/api/terminals/{}", kept[1]), None, None)
            .await;
        assert_eq!((status, &answer["error"]["code"]), (502, &json!("NODE_UNREACHABLE")));
        browser
            .until(
                "the page says b is unreachable",
                "tmuxEngine.nodes.b === 'unreachable' && document.getElementById('nodes').textContent.includes('b: unreachable')",
            )
            .await;
        let page_said = killed.elapsed();
        assert!(api_said < Duration::from_secs(2), "the API said so after {api_said:?}");
        assert!(page_said < Duration::from_secs(2), "the page said so after {page_said:?}");
        browser.screenshot("nodes.png").await;

        // a and c keep working: the page still lists theirs, the API types and kills.
        browser
            .until(
                "a's and c's listed, b's gone",
                "!!document.querySelector('#terminals li[data-node=\"a\"]') && !!document.querySelector('#terminals li[data-node=\"c\"]') && !document.querySelector('#terminals li[data-node=\"b\"]')",
            )
            .await;
        for id in [&kept[0], &kept[2]] {
            let (status, sent) = front
                .call(
                    Method::POST,
                    &format!("/api/terminals/{id}/send"),
                    Some(json!({"text": "still-here", "submit": true, "wait": "none"})),
                    None,
                )
                .await;
            assert_eq!(status, 200, "{sent}");
            let (status, killed) = front
                .call(Method::DELETE, &format!("/api/terminals/{id}"), None, None)
                .await;
            assert_eq!((status, &killed["killed"]), (200, &json!(true)), "{killed}");
        }
        browser.close().await;
    })
    .await;
}

fn error_log(root: &Path) -> String {
    std::fs::read_to_string(root.join("error.log")).unwrap_or_default()
}
