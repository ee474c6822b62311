//! Faults injected into a served tiny model (a `--features testing` build): each fails only what it touches, and the next request equals its solo run.
#![cfg(feature = "testing")]
mod cli_support;
mod serve_support;

use cli_support::{temp, tiny_model};
use serde_json::{json, Value};
use serve_support::{request, sha, Server};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const P1: &str = "The quick brown fox jumps over the lazy dog while the engine computes every bit the same way.";
const P2: &str = "A second prompt about rivers, mountains and the weather in the valley below the old bridge.";
const P3: &str = "A third prompt, queued behind the others, asking for a short story about a lighthouse keeper.";

fn model(tag: &str) -> (cli_support::TempDir, PathBuf) {
    let dir = tiny_model("faults", tag, "7");
    let m = serve_support::served_as_m(&dir.0);
    (dir, m)
}

fn completion(prompt: &str, max: usize, stream: bool) -> Value {
    json!({ "model": "m", "prompt": prompt, "max_tokens": max, "temperature": 0, "stream": stream })
}

/// The replies' hashes on a server with no faults.
fn solo(m: &Path, prompts: &[(&str, usize)]) -> Vec<String> {
    let s = Server::start(m, &[]);
    prompts.iter().map(|(p, n)| sha(&s.ok("/v1/completions", &completion(p, *n, false)))).collect()
}

fn post(addr: &str, body: &Value) -> (u16, Value) {
    request(addr, "POST", "/v1/completions", &[], body.to_string().as_bytes()).expect("POST")
}

/// Waits until `/status` shows no lane and no queue; false after `secs`.
fn idle(s: &Server, secs: u64) -> bool {
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(secs) {
        if let Ok((200, v)) = s.get("/status") {
            if v["lanes"].as_array().is_some_and(|l| l.is_empty()) && v["waiting"] == 0 {
                return true;
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    false
}

#[test]
fn a_device_error_fails_only_its_rounds_streams_and_the_next_request_is_exact() {
    let (_d, m) = model("device");
    let want = solo(&m, &[(P1, 40), (P2, 40), (P3, 24)]);
    let s = Server::start_env(&m, &["--parallel", "2"], &[("LOCKSTEP_FAULTS", "device_round@20:1")]);
    let addr = s.addr.clone();
    let (a1, a2, a3) = (addr.clone(), addr.clone(), addr.clone());
    let endless = |prompt: &str, stream: bool| json!({ "model": "m", "prompt": prompt, "max_tokens": 200, "temperature": 0, "stream": stream, "ignore_eos": true });
    let (b1, b2) = (endless(P1, true), endless(P2, false));
    let t1 = std::thread::spawn(move || post(&a1, &b1));
    let t2 = std::thread::spawn(move || post(&a2, &b2));
    std::thread::sleep(Duration::from_millis(150));
    let t3 = std::thread::spawn(move || post(&a3, &completion(P3, 24, false)));
    let (r1, r2, r3) = (t1.join().unwrap(), t2.join().unwrap(), t3.join().unwrap());
    let streamed = r1.1.as_str().unwrap_or_default().to_string();
    assert!(streamed.contains("injected fault: device_round") && !streamed.contains("token_sha"), "the streamed reply of the failed round: {streamed}");
    assert_eq!(r2.0, 500, "the unstreamed reply of the failed round: {}", r2.1);
    assert!(r2.1["error"]["message"].as_str().unwrap().contains("injected fault"), "{}", r2.1);
    assert_eq!(r3.0, 200, "the queued request: {}", r3.1);
    assert_eq!(sha(&r3.1), want[2], "the queued request after the fault equals its solo run");
    assert_eq!(sha(&s.ok("/v1/completions", &completion(P1, 40, false))), want[0], "the next request equals its solo run");
    assert!(idle(&s, 30));
    assert!(s.log().contains("the engine failed in a round: injected fault: device_round"), "{}", s.log());
}

fn snapshots(dir: &Path, ext: &str) -> Vec<PathBuf> {
    std::fs::read_dir(dir).map(|rd| rd.flatten().map(|e| e.path()).filter(|p| p.extension().is_some_and(|x| x == ext)).collect()).unwrap_or_default()
}

#[test]
fn a_failing_snapshot_dir_leaves_the_cache_serving_from_memory_and_is_logged_once() {
    let (_d, m) = model("snapfail");
    let want = solo(&m, &[(P1, 16), (P2, 16)]);
    let snaps = temp("faults", "snapfail-dir");
    let dir = snaps.0.to_str().unwrap();
    let s = Server::start_env(&m, &["--snapshot-dir", dir], &[("LOCKSTEP_FAULTS", "snapshot_write:1000")]);
    let first = s.ok("/v1/completions", &completion(P1, 16, false));
    let again = s.ok("/v1/completions", &completion(P1, 16, false));
    let other = s.ok("/v1/completions", &completion(P2, 16, false));
    assert_eq!((sha(&first), sha(&again), sha(&other)), (want[0].clone(), want[0].clone(), want[1].clone()));
    assert!(again["lockstep"]["cached_tokens"].as_u64().unwrap() > 0, "the repeat is served from the in-memory cache: {again}");
    assert_eq!(s.log().matches("injected fault: no space left on device").count(), 1, "logged once: {}", s.log());
    assert!(snapshots(&snaps.0, "lksnap").is_empty() && snapshots(&snaps.0, "tmp").is_empty());
}

/// A python client that sends a streamed request with a small receive buffer and never reads; killed when dropped.
struct Silent(std::process::Child);

impl Drop for Silent {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn silent(addr: &str, body: &Value) -> Silent {
    let (host, port) = addr.split_once(':').unwrap();
    let script = format!(
        "import socket,sys,time\ns=socket.socket()\ns.setsockopt(socket.SOL_SOCKET,socket.SO_RCVBUF,4096)\ns.connect(('{host}',{port}))\nb=sys.argv[1].encode()\ns.sendall(b'POST /v1/completions HTTP/1.1\\r\\nHost: x\\r\\nContent-Type: application/json\\r\\nContent-Length: '+str(len(b)).encode()+b'\\r\\n\\r\\n'+b)\ntime.sleep(300)\n"
    );
    Silent(Command::new("python3").args(["-c", &script, &body.to_string()]).stdout(Stdio::null()).spawn().expect("python3"))
}

#[test]
fn a_client_that_never_reads_is_cancelled_within_its_bound_and_the_others_are_exact() {
    let (_d, m) = model("silent");
    let want = solo(&m, &[(P1, 24)]);
    let s = Server::start(&m, &["--parallel", "2", "--stall-seconds", "2", "--max-unsent-bytes", "200000", "--send-buffer-kib", "16"]);
    let body = json!({ "model": "m", "prompt": P2, "max_tokens": 3000, "temperature": 0, "stream": true, "logprobs": 5, "ignore_eos": true });
    let _c = silent(&s.addr, &body);
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(sha(&s.ok("/v1/completions", &completion(P1, 24, false))), want[0], "a reading client beside the silent one");
    assert!(idle(&s, 120), "the silent stream was not cancelled: {}", s.log());
    assert!(s.log().contains("cancelled: the client left"), "{}", s.log());
    assert_eq!(sha(&s.ok("/v1/completions", &completion(P1, 24, false))), want[0], "the next request");
}

/// The `/status` body once `ready` holds of it; panics after `secs`.
fn status_when(s: &Server, secs: u64, ready: impl Fn(&Value) -> bool) -> Value {
    let t0 = Instant::now();
    loop {
        if let Ok((200, v)) = s.get("/status") {
            if ready(&v) {
                return v;
            }
        }
        assert!(t0.elapsed() < Duration::from_secs(secs), "/status never reached the state: {}", s.log());
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn a_connection_dropped_mid_prompt_frees_its_lane_and_the_others_are_exact() {
    let (_d, m) = model("dropped");
    let want = solo(&m, &[(P1, 24)]);
    let s = Server::start(&m, &["--parallel", "3", "--round-tokens", "8"]);
    let long = P2.repeat(30);
    let held: Vec<_> = [true, false].iter().map(|&stream| serve_support::hold(&s.addr, "/v1/completions", &json!({ "model": "m", "prompt": long, "max_tokens": 200, "temperature": 0, "stream": stream, "ignore_eos": true }))).collect();
    let lanes = |v: &Value| v["lanes"].as_array().cloned().unwrap_or_default();
    let before = status_when(&s, 60, |v| lanes(v).len() == 2 && lanes(v).iter().all(|l| l["phase"] == "prefill"));
    let prompt_tokens: u64 = lanes(&before).iter().map(|l| l["prompt_tokens"].as_u64().unwrap()).sum();
    drop(held);
    let r = s.ok("/v1/completions", &completion(P1, 24, false));
    assert_eq!(sha(&r), want[0], "a request beside the dropped ones");
    assert!(idle(&s, 10), "a dropped prompt kept its lane: {}", s.log());
    let totals = s.get("/status").unwrap().1["totals"].clone();
    let mine = (r["usage"]["prompt_tokens"].as_u64().unwrap(), r["usage"]["completion_tokens"].as_u64().unwrap());
    assert!(totals["prefilled_tokens"].as_u64().unwrap() < prompt_tokens + mine.0, "the dropped prompts stopped filling: {totals}");
    assert_eq!(totals["generated_tokens"].as_u64(), Some(mine.1), "the dropped streams generated nothing: {totals}");
    assert_eq!(sha(&s.ok("/v1/completions", &completion(P1, 24, false))), want[0], "the next request");
}

#[test]
fn a_full_queue_answers_429_in_each_apis_shape_and_the_next_request_is_exact() {
    let (_d, m) = model("queue");
    let want = solo(&m, &[(P1, 24)]);
    let s = Server::start(&m, &["--parallel", "1", "--max-queue", "1"]);
    let held: Vec<_> = (0..2).map(|_| serve_support::hold(&s.addr, "/v1/completions", &completion(P2, 400, true))).collect();
    std::thread::sleep(Duration::from_millis(500));
    let (code, v) = post(&s.addr, &completion(P1, 24, false));
    assert_eq!(code, 429, "{v}");
    assert!(v["error"]["message"].as_str().unwrap().contains("queue is full"), "{v}");
    let msg = json!({ "model": "m", "max_tokens": 8, "messages": [{ "role": "user", "content": "hi" }] });
    let (code, v) = request(&s.addr, "POST", "/v1/messages", &[], msg.to_string().as_bytes()).unwrap();
    assert_eq!((code, v["type"].as_str()), (429, Some("error")), "{v}");
    drop(held);
    assert!(idle(&s, 60));
    assert_eq!(sha(&s.ok("/v1/completions", &completion(P1, 24, false))), want[0]);
}

/// Starts a server on `dir` whose first snapshot write pauses halfway, sends `prompt`, and signals it once the write has begun.
fn kill_during_write(m: &Path, dir: &Path, prompt: &'static str, signal: &str) -> Server {
    let s = Server::start_env(m, &["--snapshot-dir", dir.to_str().unwrap()], &[("LOCKSTEP_FAULTS", "snapshot_slow:1")]);
    let addr = s.addr.clone();
    std::thread::spawn(move || request(&addr, "POST", "/v1/completions", &[], completion(prompt, 16, false).to_string().as_bytes()).ok());
    let t0 = Instant::now();
    while snapshots(dir, "tmp").is_empty() {
        assert!(t0.elapsed() < Duration::from_secs(60), "no snapshot write began: {}", s.log());
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = Command::new("kill").args([signal, &s.child.id().to_string()]).status();
    s
}

#[test]
fn sigkill_and_sigterm_during_snapshot_writes_never_leave_a_torn_snapshot_loaded() {
    let (_d, m) = model("kill");
    let want = solo(&m, &[(P1, 16), (P2, 16)]);
    let snaps = temp("faults", "kill-dir");
    let mut killed = kill_during_write(&m, &snaps.0, P1, "-KILL");
    let _ = killed.child.wait();
    assert_eq!(snapshots(&snaps.0, "tmp").len(), 1, "the kill left the half-written temporary file");
    assert!(snapshots(&snaps.0, "lksnap").is_empty());
    let s = Server::start(&m, &["--snapshot-dir", snaps.0.to_str().unwrap()]);
    assert!(s.log().contains("removed 1 unfinished temporary files"), "{}", s.log());
    let r = s.ok("/v1/completions", &completion(P1, 16, false));
    assert_eq!((sha(&r), r["lockstep"]["cached_tokens"].as_u64()), (want[0].clone(), Some(0)), "after SIGKILL: {r}");
    drop(s);
    let whole = snapshots(&snaps.0, "lksnap");
    assert!(!whole.is_empty(), "the restarted server wrote its snapshot");
    let bytes = std::fs::read(&whole[0]).unwrap();
    std::fs::write(&whole[0], &bytes[..bytes.len() / 2]).unwrap();
    let termed = kill_during_write(&m, &snaps.0, P2, "-TERM");
    let t0 = Instant::now();
    let mut termed = termed;
    let status = loop {
        if let Ok(Some(st)) = termed.child.try_wait() {
            break st;
        }
        assert!(t0.elapsed() < Duration::from_secs(120), "SIGTERM did not end the server: {}", termed.log());
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "SIGTERM drains and exits 0: {}", termed.log());
    assert!(snapshots(&snaps.0, "tmp").is_empty(), "the write SIGTERM interrupted was finished");
    let s = Server::start(&m, &["--snapshot-dir", snaps.0.to_str().unwrap()]);
    assert!(s.log().contains("refused: checksum mismatch"), "the torn file is refused: {}", s.log());
    assert!(s.log().contains("resumed"), "the whole snapshot is resumed: {}", s.log());
    let r1 = s.ok("/v1/completions", &completion(P1, 16, false));
    let r2 = s.ok("/v1/completions", &completion(P2, 16, false));
    assert_eq!((sha(&r1), sha(&r2)), (want[0].clone(), want[1].clone()));
    assert!(r2["lockstep"]["cached_tokens"].as_u64().unwrap() > 0, "P2 resumes from the snapshot SIGTERM let finish: {r2}");
}
