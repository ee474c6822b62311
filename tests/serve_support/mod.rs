//! Helpers for the serving tests: a `lockstep serve` child on a free port, plain HTTP over TCP, and the project's Python clients.
#![allow(dead_code)]
use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A running server; killed when dropped.
pub struct Server {
    /// The child.
    pub child: Child,
    /// `127.0.0.1:PORT`.
    pub addr: String,
    /// Everything it printed to stderr so far.
    pub log: Arc<Mutex<String>>,
}

/// Moves the checkpoint files in `dir` into `dir/m`, so the served model id is `m`; that folder.
pub fn served_as_m(dir: &Path) -> PathBuf {
    let m = dir.join("m");
    std::fs::create_dir_all(&m).unwrap();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        if e.path().is_file() {
            std::fs::rename(e.path(), m.join(e.file_name())).unwrap();
        }
    }
    m
}

/// The repository root.
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

impl Server {
    /// Starts `lockstep serve --model DIR --port 0` with `extra` flags and waits for `/health` to answer 200.
    pub fn start(model: &Path, extra: &[&str]) -> Server {
        Server::start_env(model, extra, &[])
    }

    /// [`Server::start`] with environment variables set for the child.
    pub fn start_env(model: &Path, extra: &[&str], env: &[(&str, &str)]) -> Server {
        let mut child = Command::new(env!("CARGO_BIN_EXE_lockstep"))
            .args(["serve", "--model", model.to_str().expect("utf-8"), "--port", "0"])
            .args(extra)
            .envs(env.iter().copied())
            .env("RUST_BACKTRACE", "0")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start lockstep serve");
        let log = Arc::new(Mutex::new(String::new()));
        let (tx, rx) = std::sync::mpsc::channel();
        let err = child.stderr.take().expect("stderr");
        let sink = log.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines().map_while(Result::ok) {
                if let Some(a) = line.strip_prefix("listening on http://").and_then(|r| r.split_whitespace().next()) {
                    let _ = tx.send(a.to_string());
                }
                let mut l = sink.lock().unwrap();
                l.push_str(&line);
                l.push('\n');
            }
        });
        let addr = rx.recv_timeout(Duration::from_secs(60)).unwrap_or_else(|_| panic!("the server printed no address: {}", log.lock().unwrap()));
        let mut s = Server { child, addr, log };
        let t0 = Instant::now();
        loop {
            if let Ok((200, _)) = s.get("/health") {
                break;
            }
            if let Ok(Some(status)) = s.child.try_wait() {
                panic!("the server exited with {status}: {}", s.log());
            }
            assert!(t0.elapsed() < Duration::from_secs(300), "the server never became healthy: {}", s.log());
            std::thread::sleep(Duration::from_millis(100));
        }
        s
    }

    /// The server's log so far.
    pub fn log(&self) -> String {
        self.log.lock().unwrap().clone()
    }

    /// The base URL.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// A GET: status and JSON body (or the text as a JSON string).
    pub fn get(&self, path: &str) -> std::io::Result<(u16, Value)> {
        request(&self.addr, "GET", path, &[], b"")
    }

    /// A POST of JSON.
    pub fn post(&self, path: &str, body: &Value) -> (u16, Value) {
        request(&self.addr, "POST", path, &[], body.to_string().as_bytes()).expect("POST")
    }

    /// A POST that must answer 200; its body.
    pub fn ok(&self, path: &str, body: &Value) -> Value {
        let (s, v) = self.post(path, body);
        assert_eq!(s, 200, "{path} {body} answered {s}: {v}");
        v
    }

    /// Sends SIGTERM.
    pub fn terminate(&self) {
        let _ = Command::new("kill").args(["-TERM", &self.child.id().to_string()]).status();
    }

    /// Waits for the process to exit (SIGTERM first); its status.
    pub fn stop(mut self) -> ExitStatus {
        self.terminate();
        let t0 = Instant::now();
        loop {
            if let Ok(Some(s)) = self.child.try_wait() {
                return s;
            }
            assert!(t0.elapsed() < Duration::from_secs(120), "the server did not exit after SIGTERM: {}", self.log());
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One HTTP/1.1 request with `Connection: close`; status and JSON body (non-JSON as a string).
pub fn request(addr: &str, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> std::io::Result<(u16, Value)> {
    let mut s = TcpStream::connect(addr)?;
    s.set_read_timeout(Some(Duration::from_secs(600)))?;
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n", body.len());
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    s.write_all(head.as_bytes())?;
    s.write_all(body)?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw)?;
    let text = String::from_utf8_lossy(&raw).to_string();
    let (h, b) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = h.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    let body = if h.to_ascii_lowercase().contains("transfer-encoding: chunked") { dechunk(b) } else { b.to_string() };
    Ok((status, serde_json::from_str(&body).unwrap_or(Value::String(body))))
}

fn dechunk(b: &str) -> String {
    let mut out = String::new();
    let mut rest = b;
    while let Some((len, tail)) = rest.split_once("\r\n") {
        let n = usize::from_str_radix(len.trim(), 16).unwrap_or(0);
        if n == 0 || tail.len() < n {
            break;
        }
        out.push_str(&tail[..n]);
        rest = tail[n..].trim_start_matches("\r\n");
    }
    out
}

/// Opens a streamed request, reads until `bytes` bytes of the reply arrived (0: none), then drops the connection.
pub fn start_and_drop(addr: &str, path: &str, body: &Value, bytes: usize) {
    let Ok(mut s) = TcpStream::connect(addr) else { return };
    let b = body.to_string();
    let head = format!("POST {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n", b.len());
    let _ = s.write_all(head.as_bytes());
    let _ = s.write_all(b.as_bytes());
    let _ = s.set_read_timeout(Some(Duration::from_secs(120)));
    let mut got = 0;
    let mut buf = [0u8; 256];
    while got < bytes {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => got += n,
        }
    }
}

/// Runs one of the project's Python scripts; its status, stdout and stderr.
pub fn python(script: &str, args: &[&str]) -> (bool, String, String) {
    let out = Command::new("python3").arg(root().join(script)).args(args).output().expect("python3");
    (out.status.success(), String::from_utf8_lossy(&out.stdout).to_string(), String::from_utf8_lossy(&out.stderr).to_string())
}

/// The reply's `lockstep.token_sha`.
pub fn sha(v: &Value) -> String {
    v["lockstep"]["token_sha"].as_str().unwrap_or_else(|| panic!("no token_sha in {v}")).to_string()
}

/// Sends raw request bytes and returns the whole raw reply (headers included).
pub fn raw(addr: &str, bytes: &[u8]) -> String {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(120))).unwrap();
    s.write_all(bytes).unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    String::from_utf8_lossy(&out).to_string()
}

/// Opens a streamed request and keeps the connection until the returned stream is dropped.
pub fn hold(addr: &str, path: &str, body: &Value) -> TcpStream {
    let mut s = TcpStream::connect(addr).expect("connect");
    let b = body.to_string();
    let head = format!("POST {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n", b.len());
    s.write_all(head.as_bytes()).unwrap();
    s.write_all(b.as_bytes()).unwrap();
    s
}
