//! What `serve` counts for `GET /metrics`, and the Prometheus text format
//! (version 0.0.4) it is written in. Counting is a few atomic adds or one
//! short lock per event; writing happens per scrape.
//!
//! No series carries a terminal or an owner: one label set per verb, per
//! close code, per status, so the series stay few however many terminals
//! and owners there are (a scraper's memory grows with series). What reads
//! the terminals' output stream (bytes out, scans) is not counted here: that
//! stream is being made one per terminal for every process on the host,
//! and its counters will be its own.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::registry::{BackendHealth, Census};

/// Upper bounds of the verb-latency buckets, seconds: from a keystroke's
/// send (about a millisecond) to a `send` that waits for its command
/// (the verb's wait is bounded at 30 s).
const BUCKETS: [f64; 12] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0, 30.0,
];

/// One verb's calls and how long they took.
#[derive(Default)]
struct VerbStats {
    ok: u64,
    failed: u64,
    /// Per bucket of [`BUCKETS`], not cumulative (summed when written).
    buckets: [u64; BUCKETS.len()],
    /// Calls slower than the last bucket.
    over: u64,
    sum: f64,
}

/// The counters of one bridge.
#[derive(Default)]
pub(crate) struct Metrics {
    verbs: Mutex<BTreeMap<&'static str, VerbStats>>,
    /// Close frames the bridge sent, by code.
    closes: Mutex<BTreeMap<u16, u64>>,
    /// WebSocket viewers attached now.
    viewers: AtomicU64,
    /// WebSocket viewers ever attached.
    attaches: AtomicU64,
}

/// A viewer counted while it lives.
pub(crate) struct Viewing<'a>(&'a Metrics);

impl Drop for Viewing<'_> {
    fn drop(&mut self) {
        self.0.viewers.fetch_sub(1, Ordering::Relaxed);
    }
}

/// What the bridge knows only when a scrape comes.
pub(crate) struct Sampled {
    pub(crate) census: Census,
    pub(crate) backend: BackendHealth,
    /// `/readyz` would answer 200.
    pub(crate) ready: bool,
}

impl Metrics {
    /// Counts one call of `verb` that took `took`.
    pub(crate) fn verb(&self, verb: &'static str, ok: bool, took: Duration) {
        let seconds = took.as_secs_f64();
        let mut verbs = self.verbs.lock().unwrap_or_else(|e| e.into_inner());
        let stats = verbs.entry(verb).or_default();
        if ok {
            stats.ok += 1;
        } else {
            stats.failed += 1;
        }
        stats.sum += seconds;
        match BUCKETS.iter().position(|bound| seconds <= *bound) {
            Some(bucket) => stats.buckets[bucket] += 1,
            None => stats.over += 1,
        }
    }

    /// Counts a close frame the bridge sent.
    pub(crate) fn closed(&self, code: u16) {
        let mut closes = self.closes.lock().unwrap_or_else(|e| e.into_inner());
        *closes.entry(code).or_default() += 1;
    }

    /// Counts a viewer until the returned guard drops.
    pub(crate) fn viewing(&self) -> Viewing<'_> {
        self.viewers.fetch_add(1, Ordering::Relaxed);
        self.attaches.fetch_add(1, Ordering::Relaxed);
        Viewing(self)
    }

    /// The Prometheus text exposition of everything.
    pub(crate) fn render(&self, sampled: &Sampled) -> String {
        let mut out = String::with_capacity(4096);
        let census = sampled.census;
        family(
            &mut out,
            "tmux_engine_terminals",
            "gauge",
            "Terminals this serve knows, of every owner, by status.",
        );
        for (status, n) in [
            ("running", census.running),
            ("exited", census.exited),
            ("gone", census.gone),
        ] {
            let _ = writeln!(out, "tmux_engine_terminals{{status=\"{status}\"}} {n}");
        }
        self.render_verbs(&mut out);
        family(
            &mut out,
            "tmux_engine_viewers",
            "gauge",
            "WebSocket viewers attached now.",
        );
        let _ = writeln!(
            out,
            "tmux_engine_viewers {}",
            self.viewers.load(Ordering::Relaxed)
        );
        family(
            &mut out,
            "tmux_engine_viewer_attaches_total",
            "counter",
            "WebSocket viewers ever attached.",
        );
        let _ = writeln!(
            out,
            "tmux_engine_viewer_attaches_total {}",
            self.attaches.load(Ordering::Relaxed)
        );
        family(
            &mut out,
            "tmux_engine_websocket_closes_total",
            "counter",
            "WebSocket close frames serve sent, by close code.",
        );
        let closes = self.closes.lock().unwrap_or_else(|e| e.into_inner());
        for (code, n) in closes.iter() {
            let _ = writeln!(
                out,
                "tmux_engine_websocket_closes_total{{code=\"{code}\"}} {n}"
            );
        }
        drop(closes);
        let backend = &sampled.backend;
        family(
            &mut out,
            "tmux_engine_pool_hits_total",
            "counter",
            "Spawns a pre-started tmux server served.",
        );
        let _ = writeln!(out, "tmux_engine_pool_hits_total {}", backend.pool_hits);
        family(
            &mut out,
            "tmux_engine_pool_misses_total",
            "counter",
            "Spawns that found no pre-started tmux server ready.",
        );
        let _ = writeln!(out, "tmux_engine_pool_misses_total {}", backend.pool_misses);
        family(
            &mut out,
            "tmux_engine_pool_ready",
            "gauge",
            "Pre-started tmux servers waiting for a spawn.",
        );
        let _ = writeln!(out, "tmux_engine_pool_ready {}", backend.pool_ready);
        family(
            &mut out,
            "tmux_engine_ready",
            "gauge",
            "1 when /readyz answers 200, else 0.",
        );
        let _ = writeln!(out, "tmux_engine_ready {}", u8::from(sampled.ready));
        out
    }

    fn render_verbs(&self, out: &mut String) {
        let verbs = self.verbs.lock().unwrap_or_else(|e| e.into_inner());
        family(
            out,
            "tmux_engine_verb_calls_total",
            "counter",
            "HTTP API calls of each verb (spawn, send, kill, ...), by outcome.",
        );
        for (verb, stats) in verbs.iter() {
            for (outcome, n) in [("ok", stats.ok), ("error", stats.failed)] {
                let _ = writeln!(
                    out,
                    "tmux_engine_verb_calls_total{{verb=\"{verb}\",outcome=\"{outcome}\"}} {n}"
                );
            }
        }
        family(
            out,
            "tmux_engine_verb_duration_seconds",
            "histogram",
            "How long HTTP API calls of each verb took, answer included.",
        );
        for (verb, stats) in verbs.iter() {
            let mut cumulative = 0;
            for (bound, n) in BUCKETS.iter().zip(stats.buckets) {
                cumulative += n;
                let _ = writeln!(
                    out,
                    "tmux_engine_verb_duration_seconds_bucket{{verb=\"{verb}\",le=\"{bound}\"}} {cumulative}"
                );
            }
            let count = cumulative + stats.over;
            let _ = writeln!(
                out,
                "tmux_engine_verb_duration_seconds_bucket{{verb=\"{verb}\",le=\"+Inf\"}} {count}"
            );
            let _ = writeln!(
                out,
                "tmux_engine_verb_duration_seconds_sum{{verb=\"{verb}\"}} {}",
                stats.sum
            );
            let _ = writeln!(
                out,
                "tmux_engine_verb_duration_seconds_count{{verb=\"{verb}\"}} {count}"
            );
        }
    }
}

/// A metric family's `# HELP` and `# TYPE` lines.
fn family(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sampled() -> Sampled {
        Sampled {
            census: Census::default(),
            backend: BackendHealth::default(),
            ready: true,
        }
    }

    #[test]
    fn histogram_buckets_are_cumulative_and_end_in_inf() {
        let metrics = Metrics::default();
        metrics.verb("send", true, Duration::from_micros(800));
        metrics.verb("send", true, Duration::from_millis(20));
        metrics.verb("send", false, Duration::from_secs(40));
        let text = metrics.render(&sampled());
        let line = |needle: &str| {
            text.lines()
                .find(|l| l.starts_with(needle))
                .unwrap_or_else(|| panic!("no {needle} in\n{text}"))
                .rsplit(' ')
                .next()
                .map(str::to_owned)
        };
        assert_eq!(
            line("tmux_engine_verb_duration_seconds_bucket{verb=\"send\",le=\"0.001\"}"),
            Some("1".to_owned())
        );
        assert_eq!(
            line("tmux_engine_verb_duration_seconds_bucket{verb=\"send\",le=\"0.025\"}"),
            Some("2".to_owned())
        );
        assert_eq!(
            line("tmux_engine_verb_duration_seconds_bucket{verb=\"send\",le=\"30\"}"),
            Some("2".to_owned())
        );
        assert_eq!(
            line("tmux_engine_verb_duration_seconds_bucket{verb=\"send\",le=\"+Inf\"}"),
            Some("3".to_owned())
        );
        assert_eq!(
            line("tmux_engine_verb_calls_total{verb=\"send\",outcome=\"error\"}"),
            Some("1".to_owned())
        );
    }

    #[test]
    fn viewers_count_while_their_guard_lives() {
        let metrics = Metrics::default();
        let one = metrics.viewing();
        let two = metrics.viewing();
        drop(one);
        assert!(
            metrics
                .render(&sampled())
                .contains("\ntmux_engine_viewers 1\n")
        );
        drop(two);
        let text = metrics.render(&sampled());
        assert!(text.contains("\ntmux_engine_viewers 0\n"));
        assert!(text.contains("\ntmux_engine_viewer_attaches_total 2\n"));
    }

    #[test]
    fn readiness_is_a_gauge() {
        let metrics = Metrics::default();
        let mut sampled = sampled();
        assert!(metrics.render(&sampled).contains("tmux_engine_ready 1"));
        sampled.ready = false;
        assert!(metrics.render(&sampled).contains("tmux_engine_ready 0"));
    }
}
