# tmux-engine on every client node of a Nomad cluster: a system job, one
# serve per node, its state on the node, checked on /healthz and /readyz,
# drained on SIGTERM within kill_timeout. Checked by the test suite
# (tests/bridge/deploy/manifests.rs): the check paths and port are
# serve's, its flags are ones serve accepts.
#
# The token comes from Nomad Variables:
#   nomad var put nomad/jobs/tmux-engine token="$(head -c 32 /dev/urandom | base64)"
job "tmux-engine" {
  type = "system"

  group "serve" {
    network {
      port "http" {
        static = 7681
      }
    }

    service {
      name     = "tmux-engine"
      port     = "http"
      provider = "nomad"

      check {
        name     = "alive"
        type     = "http"
        path     = "/healthz"
        interval = "10s"
        timeout  = "2s"
      }

      check {
        name     = "ready"
        type     = "http"
        path     = "/readyz"
        interval = "5s"
        timeout  = "2s"
      }
    }

    task "serve" {
      driver = "raw_exec"

      # SIGTERM drains: viewers get 1012, requests in flight finish; serve
      # is gone within 15 s (DRAIN_BOUND 10 s + 5 s detaching).
      kill_signal  = "SIGTERM"
      kill_timeout = "30s"

      config {
        command = "/usr/local/bin/tmux-engine"
        args = [
          "serve",
          "--listen", "0.0.0.0:7681",
          "--allow-plain-http",
          "--allow-host", "tmux-engine.example.com",
          "--allow-origin", "https://tmux-engine.example.com",
          "--keep-history",
        ]
      }

      env {
        TMUX_ENGINE_STATE_DIR = "/var/lib/tmux-engine"
      }

      template {
        destination = "secrets/token.env"
        env         = true
        data        = "TMUX_ENGINE_TOKEN={{ with nomadVar \"nomad/jobs/tmux-engine\" }}{{ .token }}{{ end }}"
      }

      resources {
        cpu    = 100
        memory = 128
      }
    }
  }
}
