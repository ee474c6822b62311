//! The server's page in headless Chromium (tests/clients/page_check.py over WebDriver): the dashboard shows the lanes while two chats stream, a chat from the page streams with its token_sha and its replay matches, a key is required before chatting when one is set, and `--no-ui` serves no page.
mod cli_support;
mod serve_support;

use cli_support::tiny_model;
use serve_support::{python, Server};

fn model(tag: &str) -> (cli_support::TempDir, std::path::PathBuf) {
    let dir = tiny_model("page", tag, "7");
    let m = serve_support::served_as_m(&dir.0);
    (dir, m)
}

fn check(server: &Server, args: &[&str]) {
    let url = server.url();
    let mut all = vec!["--url", url.as_str(), "--model", "m"];
    all.extend(args);
    let shots = std::env::var("LOCKSTEP_PAGE_SHOTS").unwrap_or_default();
    if !shots.is_empty() {
        all.extend(["--shots", shots.as_str()]);
    }
    let (ok, out, err) = python("tests/clients/page_check.py", &all);
    println!("{out}");
    assert!(ok, "the page check failed:\n{out}\n{err}\nserver log:\n{}", server.log());
}

#[test]
fn the_page_shows_the_lanes_streams_a_chat_with_its_token_sha_and_its_replay_matches() {
    let (_keep, m) = model("open");
    let server = Server::start(&m, &["--device", "cpu", "--parallel", "2", "--context", "1024"]);
    let (status, _) = server.get("/").expect("GET /");
    assert_eq!(status, 200);
    check(&server, &[]);
}

#[test]
fn with_an_api_key_the_page_refuses_to_chat_until_the_key_is_given() {
    let (_keep, m) = model("keyed");
    let server = Server::start(&m, &["--device", "cpu", "--parallel", "2", "--context", "1024", "--api-key", "page-sekrit"]);
    let (status, body) = server.get("/status").expect("GET /status");
    assert_eq!(status, 401, "/status needs the key: {body}");
    check(&server, &["--api-key", "page-sekrit", "--expect-key"]);
}

#[test]
fn no_ui_serves_no_page_and_the_page_carries_a_strict_content_security_policy() {
    let (_keep, m) = model("noui");
    let plain = Server::start(&m, &["--device", "cpu", "--parallel", "1", "--context", "256"]);
    let head = serve_support::raw(&plain.addr, b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let csp = head.lines().find(|l| l.to_ascii_lowercase().starts_with("content-security-policy:")).unwrap_or_else(|| panic!("no CSP: {head}")).to_string();
    for rule in ["default-src 'none'", "script-src 'self'", "connect-src 'self'", "frame-ancestors 'none'"] {
        assert!(csp.contains(rule), "{rule} missing from {csp}");
    }
    for path in ["/ui/app.js", "/ui/app.css"] {
        assert_eq!(plain.get(path).expect("GET").0, 200, "{path}");
    }
    let page = std::fs::read_to_string(serve_support::root().join("web/index.html")).unwrap();
    assert!(!page.contains("<script>") && !page.contains("style=") && !page.contains("http://") && !page.contains("https://"), "the page loads nothing inline or from elsewhere");
    drop(plain);
    let quiet = Server::start(&m, &["--device", "cpu", "--parallel", "1", "--context", "256", "--no-ui"]);
    assert_eq!(quiet.get("/").expect("GET /").0, 404);
    assert_eq!(quiet.get("/status").expect("GET /status").0, 200);
}
