//! The example deployments under `deploy/`, parsed (YAML for Kubernetes,
//! HCL for Nomad) and held to serve: their probe paths answer 200 on the
//! real binary started with the manifest's own flags, their probe port is
//! the one serve listens on, and their grace outlasts serve's drain.

use std::path::Path;

use serde_json::Value;
use tokio::net::TcpStream;
use yaml_rust2::{Yaml, YamlLoader};

use super::{Serve, exchange};
use crate::cli::Cli;
use crate::support::within;

/// What a manifest says of serve.
#[derive(Debug)]
struct Deployment {
    /// serve's arguments, `serve` first.
    args: Vec<String>,
    /// Environment the manifest sets literally.
    env: Vec<(String, String)>,
    /// Probe paths and the port each probes.
    probes: Vec<(String, u16)>,
    /// How long the scheduler waits after SIGTERM.
    grace_secs: u64,
    /// Where the state directory's volume is mounted (or the host path).
    state_mount: String,
}

fn repo(path: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(path);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn kubernetes() -> Deployment {
    let docs = YamlLoader::load_from_str(&repo("deploy/kubernetes/tmux-engine.yaml")).unwrap();
    let set = docs
        .iter()
        .find(|doc| doc["kind"].as_str() == Some("DaemonSet"))
        .expect("a DaemonSet");
    let pod = &set["spec"]["template"]["spec"];
    let containers = pod["containers"].as_vec().unwrap();
    assert_eq!(containers.len(), 1);
    let container = &containers[0];
    let text = |yaml: &Yaml| yaml.as_str().unwrap().to_owned();
    let ports: Vec<(String, u16)> = container["ports"]
        .as_vec()
        .unwrap()
        .iter()
        .map(|p| {
            let port = u16::try_from(p["containerPort"].as_i64().unwrap()).unwrap();
            (text(&p["name"]), port)
        })
        .collect();
    let port_of = |port: &Yaml| match port {
        Yaml::Integer(n) => u16::try_from(*n).unwrap(),
        Yaml::String(name) => {
            ports
                .iter()
                .find(|(n, _)| n == name)
                .expect("a named port")
                .1
        }
        other => panic!("probe port {other:?}"),
    };
    let probes = ["livenessProbe", "readinessProbe"]
        .iter()
        .map(|probe| {
            let get = &container[*probe]["httpGet"];
            (text(&get["path"]), port_of(&get["port"]))
        })
        .collect();
    let env = container["env"]
        .as_vec()
        .unwrap()
        .iter()
        .filter_map(|e| Some((text(&e["name"]), e["value"].as_str()?.to_owned())))
        .collect();
    let mount = container["volumeMounts"].as_vec().unwrap();
    let state = mount
        .iter()
        .find(|m| m["name"].as_str() == Some("state"))
        .unwrap();
    let volume = pod["volumes"]
        .as_vec()
        .unwrap()
        .iter()
        .find(|v| v["name"].as_str() == Some("state"))
        .expect("the state volume");
    assert!(
        !volume["hostPath"].is_badvalue() || !volume["persistentVolumeClaim"].is_badvalue(),
        "the state directory is a hostPath or a PVC"
    );
    Deployment {
        args: container["args"]
            .as_vec()
            .unwrap()
            .iter()
            .map(text)
            .collect(),
        env,
        probes,
        grace_secs: u64::try_from(pod["terminationGracePeriodSeconds"].as_i64().unwrap()).unwrap(),
        state_mount: text(&state["mountPath"]),
    }
}

/// A block that may appear once (an object) or more (an array).
fn each(value: &Value) -> Vec<&Value> {
    match value {
        Value::Array(items) => items.iter().collect(),
        Value::Null => Vec::new(),
        other => vec![other],
    }
}

fn nomad() -> Deployment {
    let job: Value = hcl::from_str(&repo("deploy/nomad/tmux-engine.nomad.hcl")).unwrap();
    let job = &job["job"]["tmux-engine"];
    assert_eq!(job["type"], "system", "one serve per node");
    let group = &job["group"]["serve"];
    let ports = &group["network"]["port"];
    let task = &group["task"]["serve"];
    let service = &group["service"];
    let port = u16::try_from(
        ports[service["port"].as_str().unwrap()]["static"]
            .as_u64()
            .unwrap(),
    )
    .unwrap();
    let probes = each(&service["check"])
        .into_iter()
        .map(|check| {
            assert_eq!(check["type"], "http");
            (check["path"].as_str().unwrap().to_owned(), port)
        })
        .collect();
    let grace = task["kill_timeout"].as_str().unwrap();
    assert_eq!(task["kill_signal"], "SIGTERM");
    let env = task["env"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_owned()))
        .collect::<Vec<_>>();
    let state = env
        .iter()
        .find(|(k, _)| k == "TMUX_ENGINE_STATE_DIR")
        .unwrap()
        .1
        .clone();
    Deployment {
        args: task["config"]["args"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap().to_owned())
            .collect(),
        env,
        probes,
        grace_secs: grace.trim_end_matches('s').parse().unwrap(),
        state_mount: state,
    }
}

/// Holds `deployment` to serve's own answers.
async fn check(name: &str, deployment: Deployment) {
    let drain = tmux_engine::bridge::DRAIN_BOUND.as_secs() + 5;
    assert!(
        deployment.grace_secs > drain,
        "{name}: a grace of {} s is under serve's drain ({drain} s)",
        deployment.grace_secs
    );
    let paths: Vec<&str> = deployment.probes.iter().map(|(p, _)| p.as_str()).collect();
    assert!(
        paths.contains(&"/healthz") && paths.contains(&"/readyz"),
        "{name}: {paths:?}"
    );
    assert_eq!(deployment.args.first().map(String::as_str), Some("serve"));
    let listen = deployment
        .args
        .iter()
        .position(|a| a == "--listen")
        .map(|i| deployment.args[i + 1].clone())
        .expect("--listen");
    let port: u16 = listen.rsplit(':').next().unwrap().parse().unwrap();
    for (path, probed) in &deployment.probes {
        assert_eq!(
            *probed, port,
            "{name}: {path} probes another port than serve's"
        );
    }
    let state = deployment
        .env
        .iter()
        .find(|(k, _)| k == "TMUX_ENGINE_STATE_DIR")
        .expect("TMUX_ENGINE_STATE_DIR");
    assert_eq!(
        state.1, deployment.state_mount,
        "{name}: the state directory's volume"
    );
    // The manifest's own flags on the real binary, on a loopback port.
    let args: Vec<String> = deployment.args[1..]
        .iter()
        .map(|a| {
            if *a == listen {
                "127.0.0.1:0".to_owned()
            } else {
                a.clone()
            }
        })
        .collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let serve = Serve::start(Cli::new(), &args, &[]).await;
    for path in paths {
        let stream = TcpStream::connect(serve.addr()).await.unwrap();
        // A kubelet or Nomad client probes the address, not the host name.
        let reply = exchange(stream, "GET", &format!("10.0.0.7:{port}"), path, "", None).await;
        assert_eq!(reply.status, 200, "{name}: {path}: {reply:?}");
    }
}

#[tokio::test]
async fn the_kubernetes_manifest_probes_serve_as_it_serves() {
    within(check("kubernetes", kubernetes())).await;
}

#[tokio::test]
async fn the_nomad_job_checks_serve_as_it_serves() {
    within(check("nomad", nomad())).await;
}
