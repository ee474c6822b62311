//! The fuzz targets in CI: each finds its planted bug, then runs clean for a bounded time; the inputs fuzzing once found stay refused cleanly.
#![cfg(feature = "testing")]
use lockstep::fuzz::{fuzz, targets, Budget};

fn corpus(name: &str) -> Vec<Vec<u8>> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz").join(name);
    let mut files: Vec<_> = std::fs::read_dir(&dir).map(|rd| rd.flatten().map(|e| e.path()).collect()).unwrap_or_default();
    files.sort();
    files.iter().map(|p| std::fs::read(p).expect("readable corpus file")).collect()
}

fn seconds() -> f64 {
    std::env::var("LOCKSTEP_FUZZ_SECONDS").ok().and_then(|s| s.parse().ok()).unwrap_or(8.0)
}

/// The planted switch is global: the tests take turns.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[test]
fn every_target_finds_its_planted_bug_and_then_runs_clean() {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let mut failures = Vec::new();
    for mut t in targets().expect("the fuzz targets start (the tokenizer is found through LOCKSTEP_TOKENIZER)") {
        let name = t.name();
        let planted = fuzz(t.as_mut(), Vec::new(), Budget { execs: 2_000_000, seconds: 60.0 }, 11, true).expect("planted bugs are compiled in");
        eprintln!("{name} planted: found at exec {:?} of {} in {:.1} s", planted.planted_at, planted.execs, planted.seconds);
        if planted.planted_at.is_none() {
            failures.push(format!("{name}: the planted bug was not found in {} execs", planted.execs));
        }
        let r = fuzz(t.as_mut(), corpus(name), Budget { execs: 1_000_000, seconds: seconds() }, 12, false).expect("a plain run");
        eprintln!("{name}: {} execs in {:.1} s, labels {}, panics {}, hangs {}, broken {}", r.execs, r.seconds, r.labels, r.counts.0, r.counts.1, r.counts.2);
        for (m, _) in r.panics.iter().chain(&r.broken) {
            failures.push(format!("{name}: {m}"));
        }
        if r.counts.1 > 0 {
            failures.push(format!("{name}: {} inputs took over a second", r.counts.1));
        }
        if r.execs < 1000 || r.labels < 3 {
            failures.push(format!("{name}: only {} execs reaching {} labels", r.execs, r.labels));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn inputs_fuzzing_found_are_refused_cleanly() {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    for mut t in targets().expect("the fuzz targets start") {
        for (i, input) in corpus(t.name()).iter().enumerate() {
            if let Err(e) = t.run(input) {
                panic!("{} corpus file {i}: {e}", t.name());
            }
        }
    }
    let found = |t: &str, f: &str| std::fs::read(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz").join(t).join(f)).expect("a committed input");
    // a GIF whose first frame sits right of its screen
    let gif = found("image", "found-gif-frame-right-of-screen");
    let r = lockstep::vision::decode(&gif, 1 << 16);
    assert!(r.as_ref().map_or(true, |rgb| rgb.data.len() == rgb.width as usize * rgb.height as usize * 3), "{:?}", r.map(|x| (x.width, x.height)));
    // an image placeholder inside a tool's schema
    let chat = found("chat", "found-placeholder-in-tool-schema");
    let v: serde_json::Value = serde_json::from_slice(chat.splitn(2, |&b| b == b'\n').nth(1).unwrap()).unwrap();
    let opts = lockstep::text::ChatOptions { tools: v["tools"].as_array().unwrap().clone(), ..Default::default() };
    let msgs = [lockstep::text::Message::text(lockstep::text::Role::User, "hi")];
    assert_eq!(lockstep::text::encode_chat(&msgs, &opts), Err(lockstep::text::ChatError::PlaceholderInText));
    // an engram n-gram size of 2^32
    let cfg = found("config", "found-engram-ngram-2-pow-32");
    let t = std::time::Instant::now();
    let e = lockstep::model::config::Config::from_json(std::str::from_utf8(&cfg).unwrap().trim_start()).expect_err("refused");
    assert!(e.to_string().contains("engram_max_ngram_size"), "{e}");
    assert!(t.elapsed().as_secs_f64() < 1.0);
}
