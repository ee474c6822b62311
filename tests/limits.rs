//! Limits and access on the tiny model: bodies, heads, connections and idle time bounded; token and time limits per request; the key on every route but `/health` and the page's files; snapshots never read or written through links; image URLs fetched only when enabled and only from public (or, under the testing feature, allowed) addresses.
mod cli_support;
mod serve_support;

use cli_support::{temp, tiny_model};
use serde_json::{json, Value};
use serve_support::{raw, request, sha, Server};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const PROMPT: &str = "The quick brown fox jumps over the lazy dog while the engine computes every bit the same way on every device.";

/// A tiny model in a folder named `m` (the served model id).
fn model(tag: &str) -> (cli_support::TempDir, PathBuf) {
    let dir = tiny_model("limits", tag, "7");
    let m = serve_support::served_as_m(&dir.0);
    (dir, m)
}

fn completion(prompt: &str, max: usize) -> Value {
    json!({ "model": "m", "prompt": prompt, "max_tokens": max, "temperature": 0.0, "seed": 5, "ignore_eos": true })
}

fn metric(server: &Server, name: &str) -> f64 {
    let (_, v) = server.get("/metrics").unwrap();
    let text = v.as_str().unwrap_or("").to_string();
    text.lines().find(|l| l.starts_with(&format!("{name}{{"))).and_then(|l| l.rsplit(' ').next()).and_then(|x| x.parse().ok()).unwrap_or_else(|| panic!("no metric {name} in {text}"))
}

/// Sends a chunked body of 9 MiB while reading the reply on another thread; the reply.
fn chunked_over_the_limit(addr: &str) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    let mut r = s.try_clone().unwrap();
    r.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let reader = std::thread::spawn(move || {
        let mut out = Vec::new();
        let _ = r.read_to_end(&mut out);
        String::from_utf8_lossy(&out).to_string()
    });
    let _ = s.write_all(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\nTransfer-Encoding: chunked\r\n\r\n");
    let chunk = [format!("{:x}\r\n", 1 << 16).into_bytes(), vec![b' '; 1 << 16], b"\r\n".to_vec()].concat();
    for _ in 0..(9 << 4) {
        if s.write_all(&chunk).is_err() {
            break;
        }
    }
    let _ = s.write_all(b"0\r\n\r\n");
    reader.join().unwrap()
}

/// The status of a raw HTTP reply (0 when none came).
fn status_of(reply: &str) -> u16 {
    reply.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0)
}

/// A request's JSON body after the head of a raw reply.
fn body_of(reply: &str) -> Value {
    serde_json::from_str(reply.split_once("\r\n\r\n").map_or("", |x| x.1)).unwrap_or(Value::Null)
}

#[test]
fn bodies_past_the_limit_get_413_in_each_apis_shape_heads_past_theirs_431_and_token_budgets_hold() {
    let (_keep, m) = model("sizes");
    let server = Server::start(&m, &["--device", "cpu", "--parallel", "1", "--context", "96", "--idle-timeout", "3"]);
    let over = (8 << 20) + 1;
    for (path, anthropic) in [("/v1/completions", false), ("/v1/messages", true)] {
        let head = format!("POST {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {over}\r\n\r\n{{\"model\": \"m\"");
        let reply = raw(&server.addr, head.as_bytes());
        let v = body_of(&reply);
        assert_eq!(status_of(&reply), 413, "{reply}");
        if anthropic {
            assert!(v["type"] == "error" && v["error"]["type"] == "request_too_large", "{v}");
        } else {
            assert!(v["error"]["type"] == "invalid_request_error" && v["error"]["code"] == 413, "{v}");
        }
        assert!(v.to_string().contains(&format!("over {} bytes", 8 << 20)), "{v}");
    }
    let reply = chunked_over_the_limit(&server.addr);
    assert_eq!(status_of(&reply), 413, "a chunked body past the limit: {reply}");
    assert_eq!(body_of(&reply)["error"]["code"], 413, "{reply}");
    let t0 = Instant::now();
    let reply = raw(&server.addr, b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: 100\r\n\r\n{\"model\": ");
    assert!(status_of(&reply) == 408 && body_of(&reply)["error"]["message"].as_str().unwrap_or("").contains("--idle-timeout"), "a stalled body: {reply}");
    assert!(t0.elapsed() > Duration::from_millis(2500), "a stalled body was refused after {:?}", t0.elapsed());
    let get = |extra: &str| raw(&server.addr, format!("GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n{extra}\r\n").as_bytes());
    let long = format!("x-long: {}\r\n", "a".repeat(40 << 10));
    let many: String = (0..101).map(|i| format!("x-h{i}: {i}\r\n")).collect();
    for (what, extra) in [("a 40 KiB header", long), ("101 header fields", many)] {
        let reply = get(&extra);
        assert!(reply.is_empty() || status_of(&reply) == 431, "{what}: {reply}");
        assert!(!reply.is_empty(), "{what}: the connection closed without the 431");
    }
    let near: String = format!("x-long: {}\r\n", "a".repeat(24 << 10)) + &(0..90).map(|i| format!("x-h{i}: {i}\r\n")).collect::<String>();
    assert_eq!(status_of(&get(&near)), 200, "a head within the bounds");

    for (max, why) in [(json!(0), "max_tokens"), (json!(1u64 << 25), "max_tokens"), (json!(-3), "max_tokens")] {
        let mut r = completion("Budgets.", 1);
        r["max_tokens"] = max.clone();
        let (s, v) = server.post("/v1/completions", &r);
        assert!(s == 400 && v["error"]["param"] == why, "max_tokens {max}: {s} {v}");
    }
    let (s, v) = server.post("/v1/completions", &completion(&PROMPT.repeat(8), 4));
    assert!(s == 400 && v["error"]["message"].as_str().unwrap_or("").contains("--context"), "a prompt over the context: {s} {v}");
    let v = server.ok("/v1/completions", &completion("A budget past the context ends at the context.", 100_000));
    let (prompt, made) = (v["usage"]["prompt_tokens"].as_u64().unwrap(), v["usage"]["completion_tokens"].as_u64().unwrap());
    assert_eq!((v["choices"][0]["finish_reason"].as_str(), prompt + made), (Some("length"), 96), "{v}");
}

#[test]
fn connections_past_the_bound_wait_for_a_slot_and_idle_or_slow_connections_are_closed_but_long_replies_are_not() {
    let (_keep, m) = model("conns");
    let server = Server::start(&m, &["--device", "cpu", "--parallel", "1", "--context", "512", "--max-connections", "2", "--idle-timeout", "2"]);
    let connect = || {
        let s = TcpStream::connect(&server.addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        s
    };
    let opened = Instant::now();
    let (first, mut second) = (connect(), connect());
    std::thread::sleep(Duration::from_millis(200));
    let mut third = connect();
    third.write_all(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").unwrap();
    third.set_read_timeout(Some(Duration::from_millis(700))).unwrap();
    let mut buf = [0u8; 4096];
    assert!(third.read(&mut buf).is_err(), "a third connection was served past --max-connections 2");
    let dropped = Instant::now();
    drop(first);
    third.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut reply = Vec::new();
    let _ = third.read_to_end(&mut reply);
    assert!(String::from_utf8_lossy(&reply).starts_with("HTTP/1.1 200"), "{}", String::from_utf8_lossy(&reply));
    assert!(dropped.elapsed() < Duration::from_millis(1500), "the waiting connection took {:?} after a slot freed", dropped.elapsed());

    // an idle connection, one whose head never ends, and a kept-alive one after its reply are all closed after --idle-timeout
    let mut slow = connect();
    let slow_at = Instant::now();
    slow.write_all(b"GET /health HTTP/1.1\r\nHost: x\r\n").unwrap();
    assert!(matches!(second.read(&mut buf), Ok(0)), "the idle connection stayed open");
    assert!(opened.elapsed() > Duration::from_millis(1500) && opened.elapsed() < Duration::from_secs(10), "the idle connection closed after {:?}", opened.elapsed());
    let mut rest = Vec::new();
    assert!(slow.read_to_end(&mut rest).is_ok() && !String::from_utf8_lossy(&rest).contains(" 200 "), "a head that never ended was answered or left open");
    assert!(slow_at.elapsed() > Duration::from_millis(1500) && slow_at.elapsed() < Duration::from_secs(10), "the slow head was cut after {:?}", slow_at.elapsed());
    let mut kept = connect();
    kept.write_all(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let n = kept.read(&mut buf).unwrap();
    assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"));
    let after = Instant::now();
    let mut more = Vec::new();
    assert!(kept.read_to_end(&mut more).is_ok(), "the kept-alive connection stayed open");
    assert!(after.elapsed() > Duration::from_millis(1500) && after.elapsed() < Duration::from_secs(10), "a kept-alive connection closed after {:?}", after.elapsed());

    // a streamed reply longer than the idle timeout runs to its end
    let mut body = completion("A reply that streams for longer than the idle timeout.", 160);
    body["stream"] = json!(true);
    body["stream_options"] = json!({ "include_usage": true });
    let t0 = Instant::now();
    let (s, text) = request(&server.addr, "POST", "/v1/completions", &[], body.to_string().as_bytes()).unwrap();
    let text = text.as_str().unwrap_or("").to_string();
    assert!(s == 200 && text.contains("\"completion_tokens\":160") && text.contains("[DONE]"), "{s}: {text}");
    println!("a 160-token stream took {:?} under --idle-timeout 2", t0.elapsed());
}

#[test]
fn a_request_past_its_time_limit_is_cancelled_with_a_504_naming_the_limit_and_its_lane_is_freed() {
    let (_keep, m) = model("time");
    let server = Server::start(&m, &["--device", "cpu", "--parallel", "1", "--context", "1024", "--request-timeout", "1"]);
    let quick = server.ok("/v1/completions", &completion("A short reply within the limit.", 4));
    assert_eq!(quick["usage"]["completion_tokens"], 4);
    let t0 = Instant::now();
    let (s, v) = server.post("/v1/completions", &completion(PROMPT, 800));
    assert!(s == 504 && v["error"]["type"] == "timeout_error" && v["error"]["message"].as_str().unwrap_or("").contains("--request-timeout"), "{s} {v}");
    assert!(t0.elapsed() < Duration::from_secs(15), "cancelled after {:?}", t0.elapsed());
    let messages = json!({ "model": "m", "max_tokens": 800, "temperature": 0, "messages": [{ "role": "user", "content": PROMPT }] });
    let (s, v) = server.post("/v1/messages", &messages);
    assert!(s == 504 && v["type"] == "error" && v["error"]["type"] == "timeout_error", "{s} {v}");
    let mut streamed = completion(PROMPT, 800);
    streamed["stream"] = json!(true);
    let (s, text) = request(&server.addr, "POST", "/v1/completions", &[], streamed.to_string().as_bytes()).unwrap();
    let text = text.as_str().unwrap_or("").to_string();
    assert!(s == 200 && text.contains("\"text\"") && text.contains("--request-timeout") && text.contains("timeout_error") && !text.contains("[DONE]"), "{s}: {text}");
    let t1 = Instant::now();
    while metric(&server, "vllm:num_requests_running") != 0.0 {
        assert!(t1.elapsed() < Duration::from_secs(10), "the lane stayed taken after the time limit");
        std::thread::sleep(Duration::from_millis(50));
    }
    let again = server.ok("/v1/completions", &completion("A short reply within the limit.", 4));
    assert_eq!(sha(&again), sha(&quick), "the next request on the freed lane");
}

#[test]
fn the_key_guards_every_route_but_health_and_the_pages_static_files_whatever_its_length() {
    let (_keep, m) = model("key");
    let key = "k3y-5ecr3t-a1b2c3";
    let server = Server::start(&m, &["--device", "cpu", "--parallel", "1", "--context", "256", "--api-key", key]);
    let body = |p: &str| match p {
        "/v1/messages" => json!({ "model": "m", "max_tokens": 2, "messages": [{ "role": "user", "content": "Hi" }] }).to_string(),
        "/v1/messages/count_tokens" => json!({ "model": "m", "messages": [{ "role": "user", "content": "Hi" }] }).to_string(),
        "/detokenize" => json!({ "tokens": [1, 2] }).to_string(),
        "/tokenize" => json!({ "prompt": "Hi" }).to_string(),
        "/v1/chat/completions" => json!({ "model": "m", "max_tokens": 2, "messages": [{ "role": "user", "content": "Hi" }] }).to_string(),
        "/metrics" | "/status" | "/v1/models" | "/no-such-route" => String::new(),
        _ => json!({ "model": "m", "prompt": "Hi", "max_tokens": 2 }).to_string(),
    };
    let keyed = [("GET", "/metrics"), ("GET", "/status"), ("GET", "/v1/models"), ("POST", "/tokenize"), ("POST", "/detokenize"), ("POST", "/v1/completions"), ("POST", "/v1/chat/completions"), ("POST", "/v1/messages"), ("POST", "/v1/messages/count_tokens"), ("GET", "/no-such-route")];
    let wrong_same_length = format!("{}x", &key[..key.len() - 1]);
    let bearer = |k: &str| format!("Bearer {k}");
    for (method, path) in keyed {
        let b = body(path);
        for (what, headers) in [("no key", vec![]), ("a wrong key of its length", vec![("Authorization", bearer(&wrong_same_length))]), ("a prefix of the key", vec![("x-api-key", key[..4].to_string())]), ("the key and more", vec![("x-api-key", format!("{key}0"))])] {
            let h: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
            let (s, v) = request(&server.addr, method, path, &h, b.as_bytes()).unwrap();
            assert_eq!(s, 401, "{method} {path} with {what}: {v}");
            let shape = if path.starts_with("/v1/messages") { v["type"] == "error" && v["error"]["type"] == "authentication_error" } else { v["error"]["type"] == "authentication_error" };
            assert!(shape, "{method} {path}: {v}");
        }
        for headers in [vec![("Authorization", bearer(key))], vec![("x-api-key", key.to_string())]] {
            let h: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
            let (s, v) = request(&server.addr, method, path, &h, b.as_bytes()).unwrap();
            assert!(s != 401 && (s == 200 || path == "/no-such-route"), "{method} {path} with the key: {s} {v}");
        }
    }
    for path in ["/health", "/", "/ui/app.js", "/ui/app.css"] {
        assert_eq!(server.get(path).unwrap().0, 200, "{path} without the key");
    }
}

/// The snapshot files directly in `dir`, by name.
fn snapshot_names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir).unwrap().flatten().map(|e| e.file_name().to_string_lossy().to_string()).filter(|n| n.ends_with(".lksnap")).collect();
    v.sort();
    v
}

fn cached(v: &Value) -> u64 {
    v["usage"]["prompt_tokens_details"]["cached_tokens"].as_u64().unwrap_or_else(|| panic!("no cached_tokens in {v}"))
}

#[test]
fn a_link_named_like_a_snapshot_is_neither_read_nor_written_through() {
    let (_keep, m) = model("links");
    let root = temp("limits", "snapdirs");
    let (a, b, out) = (root.0.join("a"), root.0.join("b"), root.0.join("outside"));
    std::fs::create_dir_all(&out).unwrap();
    let ask = completion(PROMPT, 4);
    let args = |dir: &Path| vec!["--device".to_string(), "cpu".into(), "--parallel".into(), "1".into(), "--context".into(), "256".into(), "--snapshot-dir".into(), dir.to_str().unwrap().into()];
    let start = |dir: &Path| {
        let v = args(dir);
        Server::start(&m, &v.iter().map(String::as_str).collect::<Vec<_>>())
    };
    let first = start(&a);
    let fresh = first.ok("/v1/completions", &ask);
    assert!(first.stop().success());
    let names = snapshot_names(&a);
    assert!(!names.is_empty(), "no snapshot was written");
    let resumed = start(&a);
    let control = resumed.ok("/v1/completions", &ask);
    assert!(cached(&control) > 0 && sha(&control) == sha(&fresh), "the real files are read back: {control}");
    assert!(resumed.stop().success());

    std::fs::create_dir_all(&b).unwrap();
    std::fs::write(out.join("victim"), b"outside the snapshot dir").unwrap();
    let mut kept = Vec::new();
    for n in &names {
        std::fs::rename(a.join(n), out.join(n)).unwrap();
        kept.push(std::fs::read(out.join(n)).unwrap());
        std::os::unix::fs::symlink(out.join(n), b.join(n)).unwrap();
        std::os::unix::fs::symlink(out.join("victim"), b.join(n).with_extension("tmp")).unwrap();
    }
    let linked = start(&b);
    let v = linked.ok("/v1/completions", &ask);
    assert_eq!(cached(&v), 0, "a snapshot was read through a link: {v}\n{}", linked.log());
    assert_eq!(sha(&v), sha(&fresh));
    let log = linked.log();
    assert!(linked.stop().success());
    assert!(!log.contains("resumed"), "{log}");
    for (n, bytes) in names.iter().zip(&kept) {
        assert_eq!(&std::fs::read(out.join(n)).unwrap(), bytes, "{n} was written through its link");
    }
    assert_eq!(std::fs::read(out.join("victim")).unwrap(), b"outside the snapshot dir", "a temporary file was written through its link");
    let replaced = names.iter().filter(|n| std::fs::symlink_metadata(b.join(n)).unwrap().is_file()).count();
    assert!(replaced > 0, "the server wrote its own files in place of the links");
}

/// A loopback image server: its address and how many connections it took.
struct Images {
    addr: SocketAddr,
    hits: Arc<AtomicUsize>,
}

/// Serves `png` at `/a.png`, and redirects, an oversized body and a stall at other paths; `/to-other` points at `other`'s port.
fn image_server(png: Vec<u8>, other: u16) -> Images {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let hits = Arc::new(AtomicUsize::new(0));
    let h = hits.clone();
    std::thread::spawn(move || {
        for s in l.incoming().flatten() {
            h.fetch_add(1, Ordering::SeqCst);
            let png = png.clone();
            std::thread::spawn(move || answer(s, &png, other));
        }
    });
    Images { addr, hits }
}

fn answer(mut s: TcpStream, png: &[u8], other: u16) {
    let _ = s.set_read_timeout(Some(Duration::from_secs(10)));
    let mut head = Vec::new();
    let mut b = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match s.read(&mut b) {
            Ok(1) if head.len() < 8192 => head.push(b[0]),
            _ => return,
        }
        if head == [0x16] {
            // a TLS handshake gets plain HTTP back
            let _ = s.write_all(b"HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n");
            return;
        }
    }
    let text = String::from_utf8_lossy(&head).to_string();
    let path = text.split_whitespace().nth(1).unwrap_or("/").to_string();
    let redirect = |to: String| format!("HTTP/1.1 302 Found\r\nLocation: {to}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n").into_bytes();
    let reply = match path.as_str() {
        "/a.png" => [format!("HTTP/1.1 200 OK\r\nContent-Type: image/png\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", png.len()).into_bytes(), png.to_vec()].concat(),
        "/hop" => redirect("a.png".into()),
        "/to-private" => redirect("http://10.0.0.1/x.png".into()),
        "/to-other" => redirect(format!("http://127.0.0.1:{other}/a.png")),
        "/loop" => redirect("/loop".into()),
        "/big" => [b"HTTP/1.1 200 OK\r\nContent-Type: image/png\r\nConnection: close\r\n\r\n".to_vec(), png.repeat(4)].concat(),
        "/slow" => {
            std::thread::sleep(Duration::from_secs(8));
            return;
        }
        _ => b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".to_vec(),
    };
    let _ = s.write_all(&reply);
}

fn base64(bytes: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for c in bytes.chunks(3) {
        let n = (u32::from(c[0]) << 16) | (u32::from(*c.get(1).unwrap_or(&0)) << 8) | u32::from(*c.get(2).unwrap_or(&0));
        for j in 0..4 {
            out.push(if j <= c.len() { A[(n >> (18 - 6 * j) & 63) as usize] as char } else { '=' });
        }
    }
    out
}

/// A greedy chat about one image at `url`.
fn chat(url: &str) -> Value {
    json!({ "model": "m", "max_tokens": 8, "temperature": 0, "seed": 3, "messages": [{ "role": "user", "content": [{ "type": "image_url", "image_url": { "url": url } }, { "type": "text", "text": "Describe the picture." }] }] })
}

#[test]
fn image_urls_are_refused_unless_enabled_then_fetched_only_from_allowed_addresses_redirects_rechecked_and_size_capped() {
    let (keep, m) = model("urls");
    let png_path = keep.0.join("a.png");
    cli_support::noise_rgb(90, 61, 0x51).save(&png_path).unwrap();
    let png = std::fs::read(&png_path).unwrap();
    let data_url = format!("data:image/png;base64,{}", base64(&png));
    let other = image_server(png.clone(), 1);
    let allowed = image_server(png.clone(), other.addr.port());
    let base = format!("http://{}", allowed.addr);
    let cap = (png.len() + 1000).to_string();
    let vision = ["--device", "cpu", "--parallel", "2", "--context", "1024", "--vision", "--max-image-bytes", cap.as_str()];

    let out = cli_support::lockstep(&["serve", "--model", m.to_str().unwrap(), "--port", "0", "--fetch-image-urls"]);
    assert!(!out.status.success() && String::from_utf8_lossy(&out.stderr).contains("--vision"), "--fetch-image-urls needs --vision");

    let off = Server::start(&m, &vision);
    let want = off.ok("/v1/chat/completions", &chat(&data_url));
    let (s, v) = off.post("/v1/chat/completions", &chat(&format!("{base}/a.png")));
    assert!(s == 400 && v["error"]["message"].as_str().unwrap_or("").contains("--fetch-image-urls") && v["error"]["message"].as_str().unwrap_or("").contains("fetching is off") && v["error"]["param"] == "messages[0].content[0].image_url", "{s} {v}");
    drop(off);
    assert_eq!(allowed.hits.load(Ordering::SeqCst), 0, "a server without --fetch-image-urls fetched");

    let allow = allowed.addr.to_string();
    let on = Server::start_env(&m, &[&vision[..], &["--fetch-image-urls", "--image-fetch-timeout", "2"]].concat(), &[("LOCKSTEP_FETCH_ALLOW", allow.as_str())]);
    let inline = on.ok("/v1/chat/completions", &chat(&data_url));
    assert_eq!(sha(&inline), sha(&want));
    for path in ["/a.png", "/hop"] {
        let got = on.ok("/v1/chat/completions", &chat(&format!("{base}{path}")));
        assert_eq!(sha(&got), sha(&want), "{path}: the fetched image's reply equals the data URL's");
    }
    let refusals = [
        (format!("http://{}/a.png", other.addr), "127.0.0.0/8 (loopback)"),
        (format!("{base}/to-private"), "10.0.0.0/8 (private)"),
        (format!("{base}/to-other"), "127.0.0.0/8 (loopback)"),
        ("http://[::ffff:169.254.169.254]/latest".to_string(), "169.254.169.254"),
        ("http://100.64.0.1/a.png".to_string(), "carrier-grade NAT"),
        ("http://[fd00::1]/a.png".to_string(), "unique local"),
        (format!("{base}/loop"), "redirected more than 3 times"),
        (format!("{base}/big"), "--max-image-bytes"),
        (format!("{base}/slow"), "--image-fetch-timeout"),
        (format!("https://{}/a.png", allowed.addr), "TLS"),
        (format!("ftp://{}/a.png", allowed.addr), "http://, https:// or data:"),
    ];
    for (url, why) in &refusals {
        let (s, v) = on.post("/v1/chat/completions", &chat(url));
        let msg = v["error"]["message"].as_str().unwrap_or("");
        assert!(s == 400 && v["error"]["type"] == "invalid_request_error" && msg.contains(why), "{url}: {s} {v}");
    }
    assert_eq!(other.hits.load(Ordering::SeqCst), 0, "a loopback server off the allowance was contacted");
    let anthropic = |url: &str| json!({ "model": "m", "max_tokens": 8, "messages": [{ "role": "user", "content": [{ "type": "image", "source": { "type": "url", "url": url } }, { "type": "text", "text": "Describe the picture." }] }] });
    on.ok("/v1/messages", &anthropic(&format!("{base}/a.png")));
    let (s, v) = on.post("/v1/messages", &anthropic(&format!("{base}/to-private")));
    assert!(s == 400 && v["type"] == "error" && v["error"]["type"] == "invalid_request_error" && v["error"]["message"].as_str().unwrap_or("").contains("private"), "{s} {v}");
}
