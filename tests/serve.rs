//! The serving contract on the tiny model, on the CPU oracle and the default GPU adapter: concurrent == solo == serial, resumed == fresh, seeded replies repeat, a cancel storm leaves the next request exact, CPU and GPU servers agree and share snapshots, SIGTERM drains.
mod cli_support;
mod serve_support;
mod variant_support;

use cli_support::{temp, tiny_model};
use serde_json::{json, Value};
use serve_support::{python, sha, start_and_drop, Server};
use std::time::{Duration, Instant};

const PROMPT: &str = "The quick brown fox jumps over the lazy dog while the engine computes every bit the same way on every device.";

fn completion(prompt: &str, max: usize, temperature: f64, seed: Option<u64>) -> Value {
    let mut v = json!({ "model": "m", "prompt": prompt, "max_tokens": max, "temperature": temperature, "lockstep": { "logits_sha": true } });
    if let Some(s) = seed {
        v["seed"] = json!(s);
    }
    v
}

/// A tiny model in a folder named `m` (the served model id).
fn model(tag: &str) -> (cli_support::TempDir, std::path::PathBuf) {
    let dir = tiny_model("serve", tag, "7");
    let m = serve_support::served_as_m(&dir.0);
    (dir, m)
}

fn metric(server: &Server, name: &str) -> f64 {
    let (_, v) = server.get("/metrics").unwrap();
    let text = v.as_str().unwrap_or("").to_string();
    text.lines().find(|l| l.starts_with(&format!("{name}{{"))).and_then(|l| l.rsplit(' ').next()).and_then(|x| x.parse().ok()).unwrap_or_else(|| panic!("no metric {name} in {text}"))
}

fn script(server: &Server, name: &str, args: &[&str]) {
    let url = server.url();
    let mut all = vec!["--url", url.as_str()];
    all.extend(args);
    let (ok, out, err) = python(name, &all);
    println!("{name}:\n{out}");
    assert!(ok, "{name} {args:?} failed:\n{out}\n{err}\nserver log:\n{}", server.log());
}

/// Every serving promise on one device.
fn contract(device: &str, max_tokens: &str) {
    let (_keep, m) = model(device);
    let budget = 50u64 << 20;
    let server = Server::start(&m, &["--device", device, "--parallel", "4", "--context", "1024", "--prompt-cache-gib", &format!("{}", budget as f64 / (1u64 << 30) as f64), "--round-tokens", "64"]);

    script(&server, "scripts/bench_concurrent.py", &["--levels", "1,4,8", "--temperatures", "0,1", "--alone", "--serial", "--mixed-lengths", "--max-tokens", max_tokens]);
    script(&server, "scripts/bench_cache.py", &["--require-cold", "--require-reuse", "--prompt-tokens", "300", "--repeats", "2", "--concurrent", "2", "--max-tokens", "4"]);

    // seeded replies repeat; an unseeded reply replays with the seed it returned
    let a = server.ok("/v1/completions", &completion("Seeds make replies repeat.", 8, 1.0, Some(42)));
    let b = server.ok("/v1/completions", &completion("Seeds make replies repeat.", 8, 1.0, Some(42)));
    assert_eq!((sha(&a), &a["lockstep"]["logits_sha"]), (sha(&b), &b["lockstep"]["logits_sha"]));
    let free = server.ok("/v1/completions", &completion("An unseeded reply returns its seed.", 8, 1.0, None));
    let seed = free["lockstep"]["seed"].as_u64().expect("a returned seed");
    let replay = server.ok("/v1/completions", &completion("An unseeded reply returns its seed.", 8, 1.0, Some(seed)));
    assert_eq!(sha(&free), sha(&replay), "the replay with the returned seed {seed}");

    // a cancel storm: 20 requests dropped at random points while 2 others run
    let long = |i: usize| format!("Storm request {i}: {}", "every bit stays the same on every device; ".repeat(20));
    let keep: Vec<Value> = (0..2).map(|i| completion(&format!("A request that runs through the storm, number {i}."), 24, 1.0, Some(100 + i as u64))).collect();
    let after = completion("The request after the storm.", 12, 1.0, Some(7));
    let solo: Vec<Value> = keep.iter().chain([&after]).map(|r| server.ok("/v1/completions", r)).collect();
    let addr = server.addr.clone();
    let runners: Vec<_> = keep.iter().cloned().map(|r| {
        let addr = addr.clone();
        std::thread::spawn(move || serve_support::request(&addr, "POST", "/v1/completions", &[], r.to_string().as_bytes()).unwrap())
    }).collect();
    let storm: Vec<_> = (0..20).map(|i| {
        let addr = addr.clone();
        let mut body = completion(&long(i), 16, 1.0, Some(i as u64));
        body["stream"] = json!(true);
        // 0 bytes: dropped while queued or mid-prompt; more: mid-reply
        let cut = [0usize, 1, 300, 900, 2000][i % 5];
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis((i as u64 * 37) % 400));
            start_and_drop(&addr, "/v1/completions", &body, cut)
        })
    }).collect();
    for s in storm {
        s.join().unwrap();
    }
    for (r, want) in runners.into_iter().zip(&solo) {
        let (status, got) = r.join().unwrap();
        assert_eq!(status, 200, "{got}");
        assert_eq!((sha(&got), &got["lockstep"]["logits_sha"]), (sha(want), &want["lockstep"]["logits_sha"]), "a request that ran through the storm");
    }
    let next = server.ok("/v1/completions", &after);
    assert_eq!((sha(&next), &next["lockstep"]["logits_sha"]), (sha(&solo[2]), &solo[2]["lockstep"]["logits_sha"]), "the request after the storm");
    let t0 = Instant::now();
    while metric(&server, "vllm:num_requests_running") != 0.0 {
        assert!(t0.elapsed() < Duration::from_secs(60), "streams still running after the storm");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(metric(&server, "lockstep:prompt_cache_bytes") <= budget as f64);
    assert_eq!(metric(&server, "lockstep:prompt_cache_budget_bytes"), budget as f64);
    assert!(metric(&server, "lockstep:heap_bytes") > 0.0, "the binary counts the heap it holds");
    assert!(server.get("/status").unwrap().1["heap_bytes"].as_u64().is_some_and(|b| b > 0), "/status reports the heap");
    println!("storm: 2 runners and the next request equal their solo runs; cache {} of {budget} bytes", metric(&server, "lockstep:prompt_cache_bytes"));
}

#[test]
fn the_serving_contract_holds_on_the_cpu_oracle() {
    contract("cpu", "24");
}

#[test]
fn the_serving_contract_holds_on_the_default_gpu_adapter() {
    contract("gpu", "12");
}

#[test]
fn cpu_and_gpu_servers_give_one_reply_and_resume_each_others_snapshots() {
    let (_keep, m) = model("cross");
    let snaps = temp("serve", "snaps");
    let dir = snaps.0.to_str().unwrap();
    let mut r = completion(PROMPT, 12, 1.0, Some(9));
    r["logprobs"] = json!(3);
    let q = completion("A second prompt for the second server.", 10, 0.0, Some(1));

    let cpu = Server::start(&m, &["--device", "cpu", "--snapshot-dir", dir]);
    let a = cpu.ok("/v1/completions", &r);
    assert_eq!(a["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
    assert!(cpu.stop().success());
    let files = std::fs::read_dir(&snaps.0).unwrap().count();
    assert!(files > 0, "the CPU server wrote no snapshot");

    let gpu = Server::start(&m, &["--device", "gpu", "--snapshot-dir", dir]);
    assert!(gpu.log().contains("resumed"), "{}", gpu.log());
    let (_, health) = gpu.get("/health").unwrap();
    assert!(health["identity"]["device"].as_str().unwrap().contains("backend="), "not a GPU adapter: {health}");
    let b = gpu.ok("/v1/completions", &r);
    assert!(b["usage"]["prompt_tokens_details"]["cached_tokens"].as_u64().unwrap() > 0, "{b}");
    assert_eq!(b["lockstep"]["prefilled_tokens"].as_u64().unwrap() + b["usage"]["prompt_tokens_details"]["cached_tokens"].as_u64().unwrap(), b["usage"]["prompt_tokens"].as_u64().unwrap());
    assert_eq!((sha(&a), &a["lockstep"]["logits_sha"], &a["choices"][0]["logprobs"]), (sha(&b), &b["lockstep"]["logits_sha"], &b["choices"][0]["logprobs"]), "a CPU snapshot resumed on the GPU");
    let gq = gpu.ok("/v1/completions", &q);
    assert!(gpu.stop().success());

    // corrupt one snapshot file and truncate another (neither Q's): both refused with their names, nothing lost
    let q_ids = fresh_ids(&m, q["prompt"].as_str().unwrap());
    let q_file = lockstep::serve::snapshot::file_name(&q_ids);
    let mut paths: Vec<_> = std::fs::read_dir(&snaps.0).unwrap().flatten().map(|e| e.path()).filter(|p| !p.ends_with(&q_file)).collect();
    assert!(snaps.0.join(&q_file).is_file(), "the GPU server wrote no snapshot of Q's prompt");
    assert!(paths.len() >= 2, "{paths:?}");
    paths.sort();
    let mut bytes = std::fs::read(&paths[0]).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x40;
    std::fs::write(&paths[0], &bytes).unwrap();
    let b1 = std::fs::read(&paths[1]).unwrap();
    std::fs::write(&paths[1], &b1[..b1.len() - 7]).unwrap();
    let cpu = Server::start(&m, &["--device", "cpu", "--snapshot-dir", dir]);
    for p in &paths[..2] {
        let name = p.file_name().unwrap().to_str().unwrap().to_string();
        assert!(cpu.log().lines().any(|l| l.contains(&name) && l.contains("refused")), "{name} not refused: {}", cpu.log());
    }
    let cq = cpu.ok("/v1/completions", &q);
    assert_eq!(cq["usage"]["prompt_tokens_details"]["cached_tokens"].as_u64(), Some(q_ids.len() as u64), "Q resumed from the GPU's snapshot: {cq}");
    assert_eq!((sha(&gq), &gq["lockstep"]["logits_sha"]), (sha(&cq), &cq["lockstep"]["logits_sha"]), "a GPU snapshot resumed on the CPU");
    let again = cpu.ok("/v1/completions", &r);
    assert_eq!(sha(&again), sha(&a), "a seeded reply after two restarts");
    drop(cpu);

    // a resumed reply equals a fresh server's: tokens, logits and logprobs
    let fresh = Server::start(&m, &["--device", "cpu", "--prompt-cache-gib", "0"]);
    let f = fresh.ok("/v1/completions", &r);
    assert_eq!(f["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
    assert_eq!((sha(&f), &f["lockstep"]["logits_sha"], &f["choices"][0]["logprobs"]), (sha(&b), &b["lockstep"]["logits_sha"], &b["choices"][0]["logprobs"]));
    let fq = fresh.ok("/v1/completions", &q);
    assert_eq!((sha(&fq), &fq["lockstep"]["logits_sha"]), (sha(&gq), &gq["lockstep"]["logits_sha"]), "one request computed fresh on the CPU and on the GPU");
}

/// A prompt's token ids as the server encodes a completion (BOS, then the text).
fn fresh_ids(m: &std::path::Path, prompt: &str) -> Vec<u64> {
    let s = Server::start(m, &["--device", "cpu", "--prompt-cache-gib", "0"]);
    let v = s.ok("/tokenize", &json!({ "prompt": prompt }));
    v["tokens"].as_array().unwrap().iter().map(|t| t.as_u64().unwrap()).collect()
}


#[test]
fn sigterm_lets_two_streams_finish_refuses_new_requests_and_exits_zero() {
    let (_keep, m) = model("drain");
    let server = Server::start(&m, &["--device", "cpu", "--drain-seconds", "120"]);
    let addr = server.addr.clone();
    let streams: Vec<_> = (0..2).map(|i| {
        let addr = addr.clone();
        let mut body = completion(&format!("Stream {i} finishes after the signal."), 40, 1.0, Some(i));
        body["stream"] = json!(true);
        body["stream_options"] = json!({ "include_usage": true });
        std::thread::spawn(move || serve_support::request(&addr, "POST", "/v1/completions", &[], body.to_string().as_bytes()).unwrap())
    }).collect();
    let t0 = Instant::now();
    while metric(&server, "vllm:num_requests_running") < 2.0 {
        assert!(t0.elapsed() < Duration::from_secs(60));
        std::thread::sleep(Duration::from_millis(20));
    }
    server.terminate();
    std::thread::sleep(Duration::from_millis(300));
    let (status, body) = server.post("/v1/completions", &completion("Too late.", 4, 0.0, None));
    assert_eq!(status, 503, "{body}");
    assert!(body["error"]["message"].as_str().unwrap().contains("shutting down"));
    for s in streams {
        let (status, text) = s.join().unwrap();
        let text = text.as_str().unwrap_or("").to_string();
        assert_eq!(status, 200);
        assert!(text.contains("\"completion_tokens\":40") && text.contains("[DONE]"), "a stream cut by the drain: {text}");
    }
    assert!(server.stop().success());
}

#[test]
fn two_hundred_malformed_requests_get_their_4xx_and_the_sdks_work_unmodified() {
    let (_keep, m) = model("clients");
    let server = Server::start(&m, &["--device", "cpu", "--parallel", "2", "--context", "512", "--api-key", "sekrit"]);
    let (s, body) = serve_support::request(&server.addr, "POST", "/v1/completions", &[], completion("no key", 2, 0.0, None).to_string().as_bytes()).unwrap();
    assert_eq!(s, 401, "{body}");
    script(&server, "tests/clients/malformed.py", &["--api-key", "sekrit", "--model", "m"]);
    let (has_sdks, _, err) = python("tests/clients/sdk_check.py", &["--help"]);
    assert!(has_sdks, "the openai and anthropic SDKs are needed (`pip install openai anthropic`; scripts/test installs them): {err}");
    script(&server, "tests/clients/sdk_check.py", &["--api-key", "sekrit", "--model", "m"]);
    let (_, health) = server.get("/health").unwrap();
    assert_eq!(health["status"], "ok");
}

#[test]
fn a_full_queue_answers_429_request_ids_echo_and_lanes_that_do_not_fit_are_refused_with_figures() {
    let (_keep, m) = model("queue");
    let out = cli_support::lockstep(&["serve", "--model", m.to_str().unwrap(), "--port", "0", "--context", "1048576", "--parallel", "4000"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("cannot hold the lanes (4000 x") && err.contains("at --context 1048576"), "{err}");

    let server = Server::start(&m, &["--device", "cpu", "--parallel", "1", "--max-queue", "1"]);
    let mut long = completion("A long reply holds the only lane.", 200, 1.0, Some(1));
    long["stream"] = json!(true);
    let _running = serve_support::hold(&server.addr, "/v1/completions", &long);
    let t0 = Instant::now();
    while metric(&server, "vllm:num_requests_running") < 1.0 {
        assert!(t0.elapsed() < Duration::from_secs(60));
        std::thread::sleep(Duration::from_millis(20));
    }
    let _queued = serve_support::hold(&server.addr, "/v1/completions", &long);
    while metric(&server, "vllm:num_requests_waiting") < 1.0 {
        assert!(t0.elapsed() < Duration::from_secs(60));
        std::thread::sleep(Duration::from_millis(20));
    }
    let body = completion("One too many.", 4, 0.0, None).to_string();
    let reply = serve_support::raw(&server.addr, format!("POST /v1/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\nx-request-id: my-id-42\r\nContent-Length: {}\r\n\r\n{body}", body.len()).as_bytes());
    let head = reply.to_ascii_lowercase();
    assert!(head.starts_with("http/1.1 429") && head.contains("retry-after: 1") && head.contains("x-request-id: my-id-42") && head.contains("the queue is full"), "{reply}");
}

#[test]
fn a_checkpoint_without_vision_serves_the_same_text_and_serve_vision_is_refused_with_the_reason() {
    let (_keep, m) = model("vision");
    let twin_root = temp("serve", "text-only");
    let t = twin_root.0.join("m");
    variant_support::copy_without(&m, &t, |n| variant_support::is_vision_tower(n) || variant_support::is_bias_vl(n));
    let refusals = [(&t, "--vision: the checkpoint has no vision tower (vision.*, aligner.*, image_start, image_end, image_newline) and no `ffn.gate.bias_vl`")];
    for (dir, why) in refusals {
        let out = cli_support::lockstep(&["serve", "--model", dir.to_str().unwrap(), "--port", "0", "--vision"]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && err.contains(why), "{err}");
        assert!(err.trim().lines().count() == 1 && !err.contains("panicked") && !err.contains("backtrace"), "one line, no backtrace: {err}");
    }
    let reply = |dir: &std::path::Path| {
        let server = Server::start(dir, &["--device", "cpu", "--parallel", "1", "--context", "512"]);
        let v = server.ok("/v1/completions", &completion(PROMPT, 12, 0.0, None));
        (sha(&v), v["choices"][0]["text"].as_str().unwrap_or("").to_string())
    };
    let (want, got) = (reply(&m), reply(&t));
    assert!(!want.1.is_empty());
    assert_eq!(got, want, "the text-only twin serves the canonical model's reply");
}

#[test]
fn a_tokenizer_without_a_v41_only_token_serves_plain_prompts_and_refuses_what_needs_it_by_name() {
    let (_keep, m) = model("v4-tokenizer");
    let canonical = Server::start(&m, &["--device", "cpu", "--parallel", "1", "--context", "512"]);
    let want = canonical.ok("/v1/completions", &completion(PROMPT, 12, 0.0, None));
    drop(canonical);
    // the V4 tokenizer names id 128799 `<｜place▁holder▁no▁799｜>`, where V4.1 has `<｜System｜>`
    let tj = m.join("tokenizer.json");
    let json = std::fs::read_to_string(&tj).unwrap();
    std::fs::write(&tj, variant_support::tokenizer_without(&json, "<｜System｜>", Some("<｜place▁holder▁no▁799｜>"))).unwrap();
    let server = Server::start(&m, &["--device", "cpu", "--parallel", "1", "--context", "512"]);
    let got = server.ok("/v1/completions", &completion(PROMPT, 12, 0.0, None));
    assert_eq!((sha(&got), &got["choices"][0]["text"]), (sha(&want), &want["choices"][0]["text"]), "a plain prompt is served as before");
    let chat = json!({ "model": "m", "messages": [{ "role": "user", "content": "Hello!" }], "max_tokens": 4, "temperature": 0.0 });
    server.ok("/v1/chat/completions", &chat);
    let mut thinking = chat.clone();
    thinking["reasoning_effort"] = json!("high");
    let (s, v) = server.post("/v1/chat/completions", &thinking);
    let msg = v["error"]["message"].as_str().unwrap_or("");
    assert!(s == 400 && v["error"]["type"] == "invalid_request_error" && v["error"]["param"] == "messages" && msg.contains("<｜System｜>"), "{s} {v}");
    let mut system = chat.clone();
    system["messages"] = json!([{ "role": "system", "content": "Be brief." }, { "role": "user", "content": "Hello!" }]);
    let (s, v) = server.post("/v1/chat/completions", &system);
    assert!(s == 400 && v["error"]["message"].as_str().unwrap_or("").contains("<｜System｜>"), "{s} {v}");
    let messages = json!({ "model": "m", "max_tokens": 4, "messages": [{ "role": "user", "content": "Hello!" }], "thinking": { "type": "enabled", "budget_tokens": 16 } });
    let (s, v) = server.post("/v1/messages", &messages);
    assert!(s == 400 && v["type"] == "error" && v["error"]["message"].as_str().unwrap_or("").contains("<｜System｜>"), "{s} {v}");
    let (s, _) = server.get("/health").unwrap();
    assert_eq!(s, 200);
}

#[test]
fn drafted_replies_resumed_or_fresh_equal_undrafted_ones_and_say_what_was_drafted() {
    let (_keep, m) = model("drafts");
    let body = |draft: bool, temperature: f64| {
        let mut v = completion("one two three one two three one two three", 60, temperature, Some(3));
        v["draft"] = json!(draft);
        v["lockstep"]["token_ids"] = json!(true);
        v
    };
    let args = ["--device", "cpu", "--parallel", "2", "--context", "512", "--always-draft"];
    let drafting = Server::start(&m, &args);
    let spec = |v: &Value, k: &str| v["lockstep"]["speculative"][k].as_u64().unwrap_or_else(|| panic!("no speculative.{k} in {v}"));
    for t in [0.0, 1.0] {
        let b = drafting.ok("/v1/completions", &body(false, t));
        let a = drafting.ok("/v1/completions", &body(true, t));
        assert!(a["lockstep"]["cached_tokens"].as_u64().unwrap_or(0) > 0, "the drafted request resumes the undrafted one's prompt from the cache: {a}");
        assert_eq!(sha(&a), sha(&b), "T={t}: the draft head's drafts change the reply");
        assert_eq!(a["lockstep"]["logits_sha"], b["lockstep"]["logits_sha"], "T={t}: logits");
        assert!(spec(&a, "drafted") > 0 && spec(&b, "drafted") == 0, "T={t}: the draft head drafted {a}, \"draft\": false did not {b}");
        let reply = b["lockstep"]["token_ids"].clone();
        for (acceptance, full) in [(1.0, true), (0.5, false)] {
            let mut f = body(true, t);
            f["lockstep"]["forced_drafts"] = reply.clone();
            f["lockstep"]["forced_acceptance"] = json!(acceptance);
            let r = drafting.ok("/v1/completions", &f);
            assert_eq!(sha(&r), sha(&b), "T={t}: drafts forced at {acceptance} change the reply");
            assert_eq!(r["lockstep"]["logits_sha"], b["lockstep"]["logits_sha"], "T={t}: logits with forced drafts");
            let (rounds, drafted, accepted) = (spec(&r, "rounds"), spec(&r, "drafted"), spec(&r, "accepted"));
            assert!(rounds > 0 && accepted > 0 && (accepted == drafted) == full, "T={t} forced {acceptance}: {rounds} rounds, {drafted} drafted, {accepted} accepted");
            assert!(rounds * 2 < 60, "T={t} forced {acceptance}: {rounds} rounds for 60 tokens");
        }
    }
    drop(drafting);
    let plain = Server::start(&m, &[&args[..6], &["--no-drafts", "--prompt-cache-gib", "0"]].concat());
    let c = plain.ok("/v1/completions", &body(true, 1.0));
    let drafting = Server::start(&m, &args);
    let a = drafting.ok("/v1/completions", &body(true, 1.0));
    assert_eq!(sha(&c), sha(&a), "--no-drafts gives the drafted reply's tokens");
    assert_eq!(c["lockstep"]["logits_sha"], a["lockstep"]["logits_sha"], "--no-drafts gives the drafted reply's logits");
    assert_eq!(spec(&c, "drafted"), 0, "--no-drafts drafted");
}
