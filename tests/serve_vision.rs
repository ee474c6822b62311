//! Image prompts served on the tiny model: one reply in one chunk or in chunks that cut the span, alone or beside text streams, fresh or resumed (from memory, another file format, or disk), drafted or not, on the CPU and the GPU; every bad image a 400 naming its limit, through raw HTTP and both SDKs.
mod cli_support;
mod serve_support;

use cli_support::{lockstep, temp, tiny_model, TempDir};
use serde_json::{json, Value};
use serve_support::{python, sha, Server};
use std::path::{Path, PathBuf};

const ASK: &str = "Describe the picture.";

/// A tiny model in a folder named `m`, with test images beside it.
struct Fixture {
    _dir: TempDir,
    model: PathBuf,
    /// 90x61 noise (PNG), the same pixels as WebP, other noise of that size, 120x100 noise, 200x100 flat.
    a_png: PathBuf,
    a_webp: PathBuf,
    b_png: PathBuf,
    c_png: PathBuf,
    big: PathBuf,
}

fn fixture(tag: &str) -> Fixture {
    let dir = tiny_model("serve-vision", tag, "7");
    let model = serve_support::served_as_m(&dir.0);
    let at = |n: &str| dir.0.join(n);
    let a = cli_support::noise_rgb(90, 61, 0x51);
    a.save(at("a.png")).unwrap();
    let mut webp = Vec::new();
    image::codecs::webp::WebPEncoder::new_lossless(&mut webp).encode(a.as_raw(), 90, 61, image::ExtendedColorType::Rgb8).unwrap();
    std::fs::write(at("a.webp"), webp).unwrap();
    cli_support::noise_rgb(90, 61, 0x77).save(at("b.png")).unwrap();
    cli_support::noise_rgb(120, 100, 0x99).save(at("c.png")).unwrap();
    image::RgbImage::from_pixel(200, 100, image::Rgb([10, 200, 30])).save(at("big.png")).unwrap();
    Fixture { model, a_png: at("a.png"), a_webp: at("a.webp"), b_png: at("b.png"), c_png: at("c.png"), big: at("big.png"), _dir: dir }
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

fn data_url(path: &Path, media: &str) -> String {
    format!("data:{media};base64,{}", base64(&std::fs::read(path).unwrap()))
}

fn part(path: &Path) -> Value {
    let media = if path.extension().is_some_and(|x| x == "webp") { "image/webp" } else { "image/png" };
    json!({ "type": "image_url", "image_url": { "url": data_url(path, media) } })
}

/// The SDK check's chat: the image parts, then the question; greedy, seed 3, logits hashed.
fn chat(images: &[Value], text: &str) -> Value {
    let mut content: Vec<Value> = images.to_vec();
    content.push(json!({ "type": "text", "text": text }));
    json!({ "model": "m", "max_tokens": 8, "temperature": 0, "seed": 3, "messages": [{ "role": "user", "content": content }], "lockstep": { "logits_sha": true } })
}

fn hashes(v: &Value) -> (String, Value) {
    (sha(v), v["lockstep"]["logits_sha"].clone())
}

fn cached(v: &Value) -> u64 {
    v["usage"]["prompt_tokens_details"]["cached_tokens"].as_u64().unwrap_or_else(|| panic!("no cached_tokens in {v}"))
}

fn prompt_tokens(v: &Value) -> u64 {
    v["usage"]["prompt_tokens"].as_u64().unwrap()
}

fn vision_server(f: &Fixture, extra: &[&str]) -> Server {
    let mut args = vec!["--vision", "--parallel", "4", "--context", "1024"];
    args.extend(extra);
    Server::start(&f.model, &args)
}

#[test]
fn an_image_prompt_gives_one_reply_in_one_chunk_or_cut_chunks_alone_or_beside_text_fresh_or_resumed() {
    let f = fixture("one-reply");
    let r = chat(&[part(&f.a_png)], ASK);

    // the CLI path
    let out = lockstep(&["run", "--model", f.model.to_str().unwrap(), "--chat", "--prompt", ASK, "--image", f.a_png.to_str().unwrap(), "--max-tokens", "8", "--prefill-chunk", "3"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let cli = stdout.lines().find_map(|l| l.strip_prefix("token_sha256=")).unwrap_or_else(|| panic!("run --image: {stdout}{}", String::from_utf8_lossy(&out.stderr))).to_string();

    // fresh, one chunk for the whole prompt
    let one = vision_server(&f, &["--device", "cpu", "--round-tokens", "512", "--prompt-cache-gib", "0"]);
    let want = one.ok("/v1/chat/completions", &r);
    assert_eq!(sha(&want), cli, "served == lockstep run --image");
    assert_eq!(cached(&want), 0);
    let text = |i: usize| json!({ "model": "m", "prompt": format!("Text stream {i} runs beside the image: {}", "the bits stay the same; ".repeat(6)), "max_tokens": 16, "temperature": 1, "seed": i, "lockstep": { "logits_sha": true } });
    let text_solo: Vec<Value> = (0..3).map(|i| one.ok("/v1/completions", &text(i))).collect();
    let r2 = chat(&[part(&f.a_png)], "Describe the picture in one word.");
    let r2_solo = one.ok("/v1/chat/completions", &r2);
    let follow = json!({ "model": "m", "max_tokens": 8, "temperature": 0, "seed": 3, "lockstep": { "logits_sha": true }, "messages": [
        r["messages"][0].clone(),
        { "role": "assistant", "content": want["choices"][0]["message"]["content"].clone() },
        { "role": "user", "content": "And its colors?" } ] });
    let follow_solo = one.ok("/v1/chat/completions", &follow);
    let b_solo = one.ok("/v1/chat/completions", &chat(&[part(&f.b_png)], ASK));
    drop(one);

    // chunks of 5 positions cut the image's span; the cache and snapshots on
    let snaps = temp("serve-vision", "snaps");
    let cut = vision_server(&f, &["--device", "cpu", "--round-tokens", "5", "--snapshot-dir", snaps.0.to_str().unwrap()]);
    let counted = cut.ok("/tokenize", &json!({ "model": "m", "messages": r["messages"] }));
    let text_only = cut.ok("/tokenize", &json!({ "model": "m", "messages": [{ "role": "user", "content": ASK }] }));
    let span = counted["image_tokens"].as_u64().unwrap();
    assert!(span >= 3 && counted["count"].as_u64().unwrap() == text_only["count"].as_u64().unwrap() + span + 1, "/tokenize: {counted} vs {text_only}");
    let fresh = cut.ok("/v1/chat/completions", &r);
    assert_eq!(prompt_tokens(&fresh), counted["count"].as_u64().unwrap(), "/tokenize counts what the chat prefills");
    assert_eq!((hashes(&fresh), cached(&fresh)), (hashes(&want), 0), "chunks that cut the span == one chunk");
    let again = cut.ok("/v1/chat/completions", &r);
    assert_eq!((hashes(&again), cached(&again)), (hashes(&want), prompt_tokens(&want)), "resumed from the cache == fresh");
    let webp = cut.ok("/v1/chat/completions", &chat(&[part(&f.a_webp)], ASK));
    assert_eq!((hashes(&webp), cached(&webp)), (hashes(&want), prompt_tokens(&want)), "the same pixels as WebP hit the cache");
    let other = cut.ok("/v1/chat/completions", &chat(&[part(&f.b_png)], ASK));
    let start = counted["tokens"].as_array().unwrap().iter().position(|t| t == 129_264).expect("an image position") as u64;
    assert!(cached(&other) <= start, "a different image of the same size resumed {} positions; its span starts within {start}", cached(&other));
    assert_eq!(hashes(&other), hashes(&b_solo), "the other image's reply is its own");
    assert_ne!(other["lockstep"]["logits_sha"], want["lockstep"]["logits_sha"], "a different image gives different logits");
    let resumed = cut.ok("/v1/chat/completions", &follow);
    assert!(cached(&resumed) >= prompt_tokens(&want), "the follow-up resumed {} positions, past the image's span ({})", cached(&resumed), prompt_tokens(&want));
    assert_eq!(hashes(&resumed), hashes(&follow_solo), "a follow-up resumed past the image == fresh");

    // in a round with three text streams
    let addr = cut.addr.clone();
    let runners: Vec<_> = (0..3)
        .map(|i| {
            let (addr, body) = (addr.clone(), text(i));
            std::thread::spawn(move || serve_support::request(&addr, "POST", "/v1/completions", &[], body.to_string().as_bytes()).unwrap())
        })
        .collect();
    let beside = cut.ok("/v1/chat/completions", &r2);
    for (h, solo) in runners.into_iter().zip(&text_solo) {
        let (status, got) = h.join().unwrap();
        assert_eq!(status, 200, "{got}");
        assert_eq!(hashes(&got), hashes(solo), "a text stream beside the image");
    }
    assert_eq!((hashes(&beside), cached(&beside) <= start), (hashes(&r2_solo), true), "the image prompt beside three text streams == alone");
    drop(cut);

    // a restart resumes the image prompt from its snapshot on disk
    let restarted = vision_server(&f, &["--device", "cpu", "--round-tokens", "5", "--snapshot-dir", snaps.0.to_str().unwrap()]);
    let from_disk = restarted.ok("/v1/chat/completions", &r);
    assert_eq!((hashes(&from_disk), cached(&from_disk)), (hashes(&want), prompt_tokens(&want)), "resumed from disk == fresh");
    drop(restarted);

    // drafted every round from the first decode position == undrafted
    let drafting = vision_server(&f, &["--device", "cpu", "--round-tokens", "5", "--always-draft", "--prompt-cache-gib", "0"]);
    let drafted = drafting.ok("/v1/chat/completions", &r);
    assert_eq!(hashes(&drafted), hashes(&want), "drafted == undrafted");
    assert!(drafted["lockstep"]["speculative"]["drafted"].as_u64().unwrap_or(0) > 0, "no drafts were fed: {drafted}");
    println!("image prompt: {} positions ({span} in the span): one chunk == cut chunks == cached == WebP == beside text == from disk == drafted; token_sha {}", prompt_tokens(&want), sha(&want));
}

#[test]
fn an_image_prompt_served_on_the_default_gpu_adapter_equals_the_cpu_oracle() {
    let f = fixture("gpu");
    let r = chat(&[part(&f.a_png)], ASK);
    let cpu = vision_server(&f, &["--device", "cpu", "--round-tokens", "512", "--prompt-cache-gib", "0"]);
    let want = cpu.ok("/v1/chat/completions", &r);
    drop(cpu);
    let gpu = vision_server(&f, &["--device", "gpu", "--round-tokens", "7"]);
    let got = gpu.ok("/v1/chat/completions", &r);
    assert_eq!(hashes(&got), hashes(&want), "gpu (chunks of 7) == cpu (one chunk)");
    let again = gpu.ok("/v1/chat/completions", &r);
    assert_eq!((hashes(&again), cached(&again)), (hashes(&want), prompt_tokens(&want)));
    println!("gpu == cpu for the image prompt: {}", sha(&want));
}

/// Posts `body` to `path` and checks a 400 in the route's error shape whose message holds `want`.
fn refused(server: &Server, path: &str, body: &Value, want: &str) {
    let (status, v) = server.post(path, body);
    let message = if path.starts_with("/v1/messages") {
        assert_eq!(v["type"], "error", "{v}");
        v["error"]["message"].as_str().unwrap_or("").to_string()
    } else {
        v["error"]["message"].as_str().unwrap_or("").to_string()
    };
    assert!(status == 400 && message.contains(want), "{path}: want a 400 with `{want}`, got {status}: {v}");
}

#[test]
fn every_bad_image_gets_a_400_naming_its_fault_and_the_server_keeps_serving_through_both_sdks() {
    let f = fixture("bad");
    let server = vision_server(&f, &["--device", "cpu", "--max-images", "2", "--max-image-pixels", "15000", "--max-image-bytes", "20000", "--max-image-tokens", "30"]);
    let good = chat(&[part(&f.a_png)], ASK);
    let want = server.ok("/v1/chat/completions", &good);
    let png = std::fs::read(&f.a_png).unwrap();
    let url = |bytes: &[u8], media: &str| json!({ "type": "image_url", "image_url": { "url": format!("data:{media};base64,{}", base64(bytes)) } });
    let block = |data: String, media: &str| json!({ "type": "image", "source": { "type": "base64", "media_type": media, "data": data } });
    let messages = |blocks: Vec<Value>| json!({ "model": "m", "max_tokens": 4, "messages": [{ "role": "user", "content": blocks }] });
    let cases = [
        (chat(&[url(&png[..200], "image/png")], ASK), "cannot decode the PNG image"),
        (chat(&[url(b"no picture here", "image/png")], ASK), "not an image"),
        (chat(&[part(&f.big)], ASK), "(--max-image-pixels)"),
        (chat(&[part(&f.a_png), part(&f.a_png), part(&f.a_png)], ASK), "(--max-images)"),
        (chat(&[part(&f.c_png)], ASK), "(--max-image-bytes)"),
        (chat(&[part(&f.a_png), part(&f.b_png)], ASK), "(--max-image-tokens)"),
        (chat(&[json!({ "type": "image_url", "image_url": { "url": "https://example.com/a.png" } })], ASK), "does not fetch image URLs"),
        (chat(&[url(&png, "image/jpeg")], ASK), "the data is a PNG image"),
        (chat(&[url(&png, "text/plain")], ASK), "is not taken"),
        (chat(&[json!({ "type": "image_url", "image_url": { "url": "data:image/png;base64,iVBO*w0K" } })], ASK), "not valid base64"),
        (json!({ "model": "m", "messages": [{ "role": "system", "content": [part(&f.a_png)] }, { "role": "user", "content": "hi" }] }), "only in the content of user messages"),
    ];
    for (body, why) in &cases {
        refused(&server, "/v1/chat/completions", body, why);
    }
    let b64 = base64(&png);
    let anthropic_cases = [
        (messages(vec![block(b64[..200].to_string(), "image/png")]), "cannot decode"),
        (messages(vec![block(b64.clone(), "image/gif")]), "the data is a PNG image"),
        (messages(vec![block(b64.clone(), "image/png"), block(b64.clone(), "image/png"), block(b64.clone(), "image/png")]), "(--max-images)"),
        (messages(vec![json!({ "type": "image", "source": { "type": "url", "url": "https://example.com/a.png" } })]), "does not fetch image URLs"),
        (json!({ "model": "m", "max_tokens": 4, "messages": [{ "role": "user", "content": "hi" }, { "role": "assistant", "content": [block(b64.clone(), "image/png")] }] }), "only in user messages"),
        (json!({ "model": "m", "max_tokens": 4, "messages": [{ "role": "user", "content": [{ "type": "tool_result", "tool_use_id": "t", "content": [block(b64.clone(), "image/png")] }] }] }), "only in the content of user messages"),
    ];
    for (body, why) in &anthropic_cases {
        refused(&server, "/v1/messages", body, why);
    }
    assert_eq!(hashes(&server.ok("/v1/chat/completions", &good)), hashes(&want), "the good request after the bad ones");
    let url_s = server.url();
    let (ok, out, err) = python("tests/clients/sdk_check.py", &["--url", &url_s, "--model", "m", "--image", f.a_png.to_str().unwrap(), "--big-image", f.big.to_str().unwrap(), "--max-images", "2"]);
    println!("sdk_check.py --image:\n{out}");
    assert!(ok, "the SDK image checks failed:\n{out}\n{err}\nserver log:\n{}", server.log());
    let report: Value = out.lines().last().and_then(|l| serde_json::from_str(l).ok()).expect("a JSON summary");
    assert_eq!(report["image_shas"]["openai"], json!(sha(&want)), "the openai SDK's image chat == the raw request");
    assert_eq!(report["image_shas"]["anthropic"], json!(sha(&want)), "the anthropic SDK's image message == the raw request");
    let (_, health) = server.get("/health").unwrap();
    assert_eq!(health["status"], "ok");
    drop(server);

    let text = Server::start(&f.model, &["--device", "cpu", "--parallel", "1", "--context", "512"]);
    refused(&text, "/v1/chat/completions", &good, "started without --vision");
    println!("{} bad requests refused with their 400s; both SDKs served the image", cases.len() + anthropic_cases.len());
}
