//! Prometheus metrics with vLLM's names: requests running and waiting, tokens, latencies as histograms, the prefix cache.
use crate::serve::{Finish, Status};
use serde_json::{json, Value};
use std::collections::VecDeque;
use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Instant;

/// Bucket bounds in seconds.
const BOUNDS: &[f64] = &[0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0];

/// A cumulative histogram.
#[derive(Default)]
struct Hist {
    counts: Vec<u64>,
    sum: f64,
    n: u64,
}

impl Hist {
    fn observe(&mut self, x: f64) {
        if self.counts.is_empty() {
            self.counts = vec![0; BOUNDS.len()];
        }
        for (c, &b) in self.counts.iter_mut().zip(BOUNDS) {
            if x <= b {
                *c += 1;
            }
        }
        self.sum += x;
        self.n += 1;
    }

    fn render(&self, out: &mut String, name: &str, help: &str, model: &str) {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
        for (i, b) in BOUNDS.iter().enumerate() {
            let _ = writeln!(out, "{name}_bucket{{model_name=\"{model}\",le=\"{b}\"}} {}", self.counts.get(i).copied().unwrap_or(0));
        }
        let _ = writeln!(out, "{name}_bucket{{model_name=\"{model}\",le=\"+Inf\"}} {}\n{name}_sum{{model_name=\"{model}\"}} {}\n{name}_count{{model_name=\"{model}\"}} {}", self.n, self.sum, self.n);
    }
}

/// The server's counters.
#[derive(Default)]
pub struct Metrics {
    prompt_tokens: AtomicU64,
    generation_tokens: AtomicU64,
    finished: AtomicU64,
    failed: AtomicU64,
    hists: Mutex<[Hist; 4]>,
}

impl Metrics {
    /// Counts a finished reply.
    pub fn finished(&self, f: &Finish) {
        self.prompt_tokens.fetch_add(f.prefilled_tokens as u64, Ordering::Relaxed);
        self.generation_tokens.fetch_add(f.tokens.len() as u64, Ordering::Relaxed);
        self.finished.fetch_add(1, Ordering::Relaxed);
        let mut h = self.hists.lock().unwrap_or_else(|p| p.into_inner());
        h[0].observe(f.ttft_s);
        if f.decode_tok_s > 0.0 {
            h[1].observe(1.0 / f.decode_tok_s);
        }
        h[2].observe(f.ttft_s + if f.decode_tok_s > 0.0 { (f.tokens.len() - 1) as f64 / f.decode_tok_s } else { 0.0 });
        h[3].observe(f.queue_s);
    }

    /// Counts a failed request.
    pub fn failed(&self) {
        self.failed.fetch_add(1, Ordering::Relaxed);
    }

    /// The exposition text.
    pub fn render(&self, st: &Status, model: &str) -> String {
        let mut o = String::new();
        let mut gauge = |name: &str, help: &str, kind: &str, v: f64| {
            let _ = writeln!(o, "# HELP {name} {help}\n# TYPE {name} {kind}\n{name}{{model_name=\"{model}\"}} {v}");
        };
        gauge("vllm:num_requests_running", "Requests in a lane.", "gauge", st.lanes.len() as f64);
        gauge("vllm:num_requests_waiting", "Requests waiting for a lane.", "gauge", st.waiting as f64);
        gauge("vllm:prompt_tokens_total", "Prompt tokens computed (cached ones excluded).", "counter", self.prompt_tokens.load(Ordering::Relaxed) as f64);
        gauge("vllm:generation_tokens_total", "Generated tokens.", "counter", self.generation_tokens.load(Ordering::Relaxed) as f64);
        gauge("vllm:request_success_total", "Requests that finished.", "counter", self.finished.load(Ordering::Relaxed) as f64);
        gauge("lockstep:request_failure_total", "Requests that failed in the engine or were refused by it.", "counter", self.failed.load(Ordering::Relaxed) as f64);
        gauge("vllm:prefix_cache_queries_total", "Prompt tokens looked up in the prompt cache.", "counter", st.cache_queries as f64);
        gauge("vllm:prefix_cache_hits_total", "Prompt tokens resumed from the prompt cache.", "counter", st.cache_hits as f64);
        gauge("lockstep:prompt_cache_bytes", "Bytes the prompt cache holds.", "gauge", st.cache_bytes as f64);
        gauge("lockstep:prompt_cache_budget_bytes", "The prompt cache's budget.", "gauge", st.cache_budget as f64);
        gauge("lockstep:prompt_cache_entries", "Snapshots in the prompt cache.", "gauge", st.cache_entries as f64);
        if let Some(b) = crate::serve::heap::live_bytes() {
            gauge("lockstep:heap_bytes", "Bytes the process holds on its heap (the allocator may keep more).", "gauge", b as f64);
        }
        let h = self.hists.lock().unwrap_or_else(|p| p.into_inner());
        h[0].render(&mut o, "vllm:time_to_first_token_seconds", "Time to the first token.", model);
        h[1].render(&mut o, "vllm:time_per_output_token_seconds", "Time per token after the first.", model);
        h[2].render(&mut o, "vllm:e2e_request_latency_seconds", "Arrival to the last token.", model);
        h[3].render(&mut o, "vllm:request_queue_time_seconds", "Time waiting for a lane.", model);
        o
    }
}

/// Seconds between rate samples.
pub const SAMPLE_S: u64 = 2;
/// Samples kept: ten minutes.
const SAMPLES: usize = 300;

/// Token counters sampled every `SAMPLE_S`, for the page's rate charts.
#[derive(Default)]
pub struct Rates {
    samples: Mutex<VecDeque<(Instant, u64, u64)>>,
}

impl Rates {
    /// Records the counters now.
    pub fn sample(&self, prefilled: u64, generated: u64) {
        let mut s = self.samples.lock().unwrap_or_else(|p| p.into_inner());
        s.push_back((Instant::now(), prefilled, generated));
        while s.len() > SAMPLES + 1 {
            s.pop_front();
        }
    }

    /// Prefill and decode tokens per second between consecutive samples, oldest first, with each interval's age in seconds.
    pub fn series(&self) -> Vec<Value> {
        let s = self.samples.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        s.iter()
            .zip(s.iter().skip(1))
            .map(|(a, b)| {
                let dt = b.0.duration_since(a.0).as_secs_f64().max(1e-3);
                json!({ "age_s": now.duration_since(b.0).as_secs_f64(), "prefill_tok_s": (b.1 - a.1) as f64 / dt, "decode_tok_s": (b.2 - a.2) as f64 / dt })
            })
            .collect()
    }
}
