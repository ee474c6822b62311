//! `lockstep fuzz`: runs the fuzz targets for a budget, from and into the corpus under `fuzz/`, and says what each found.
use crate::fuzz::{fuzz, targets, Budget, Report, NAMES};
use anyhow::{bail, Result};
use sha2::{Digest, Sha256};
use std::io::Write;
use std::path::{Path, PathBuf};

/// Options of `lockstep fuzz`.
#[derive(clap::Args, Debug, Clone)]
pub struct FuzzArgs {
    /// Targets to run (default: all): http, dsml, chat, tokenizer, safetensors, config, snapshot, image.
    pub targets: Vec<String>,
    /// Most seconds per target.
    #[arg(long, default_value_t = 10.0)]
    pub seconds: f64,
    /// Most executions per target.
    #[arg(long, default_value_t = 1_000_000)]
    pub execs: u64,
    /// Seed of the mutations.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Switch each target's planted bug on and start from the seeds alone; the run must find it (needs a `--features testing` build).
    #[arg(long)]
    pub planted: bool,
    /// The corpus: one folder per target.
    #[arg(long, default_value = "fuzz")]
    pub corpus: PathBuf,
    /// Add the inputs that reached new labels to the corpus (at most this many files per target).
    #[arg(long, default_value_t = 0)]
    pub save: usize,
    /// Where failing inputs are written.
    #[arg(long, default_value = "target/fuzz-failures")]
    pub failures: PathBuf,
}

fn name_of(input: &[u8]) -> String {
    Sha256::digest(input).iter().take(8).map(|b| format!("{b:02x}")).collect()
}

/// The corpus files of `dir` (none when it does not exist).
fn corpus_of(dir: &Path) -> Result<Vec<Vec<u8>>> {
    let Ok(rd) = std::fs::read_dir(dir) else { return Ok(Vec::new()) };
    let mut files: Vec<PathBuf> = rd.flatten().map(|e| e.path()).filter(|p| p.is_file()).collect();
    files.sort();
    files.iter().map(|p| std::fs::read(p).map_err(|e| anyhow::anyhow!("reading {}: {e}", p.display()))).collect()
}

/// Writes `input` under `dir` by its hash; the path.
fn keep(dir: &Path, prefix: &str, input: &[u8]) -> Result<PathBuf> {
    std::fs::create_dir_all(dir)?;
    let p = dir.join(format!("{prefix}{}", name_of(input)));
    std::fs::write(&p, input)?;
    Ok(p)
}

fn line(r: &Report, planted: bool) -> String {
    let rate = r.execs as f64 / r.seconds.max(1e-9);
    let found = match (planted, r.planted_at) {
        (false, _) => String::new(),
        (true, Some(n)) => format!(", planted bug found at exec {n}"),
        (true, None) => ", planted bug NOT found".into(),
    };
    format!(
        "fuzz {}: {} execs in {:.1} s ({rate:.0}/s), corpus {} -> {}, labels {}, panics {}, hangs {} (slowest {:.3} s), broken {}{found}",
        r.target, r.execs, r.seconds, r.corpus.0, r.corpus.1, r.labels, r.counts.0, r.counts.1, r.slowest, r.counts.2
    )
}

/// Runs the targets `args` names; fails when any finds a panic, a hang or a broken property, or misses its planted bug.
pub fn run(args: &FuzzArgs, out: &mut dyn Write) -> Result<()> {
    if let Some(bad) = args.targets.iter().find(|t| !NAMES.contains(&t.as_str())) {
        bail!("unknown fuzz target `{bad}`; the targets are {}", NAMES.join(", "));
    }
    if args.planted && !crate::testing::COMPILED {
        bail!("--planted needs a build with the planted bugs: cargo build --release --features testing");
    }
    let mut bad = Vec::new();
    for mut t in targets().map_err(anyhow::Error::msg)? {
        if !args.targets.is_empty() && !args.targets.iter().any(|n| n == t.name()) {
            continue;
        }
        let dir = args.corpus.join(t.name());
        // a planted run starts from the seeds alone, so the mutations themselves must reach the bug
        let corpus = if args.planted { Vec::new() } else { corpus_of(&dir)? };
        let r = fuzz(t.as_mut(), corpus, Budget { execs: args.execs, seconds: args.seconds }, args.seed, args.planted).map_err(anyhow::Error::msg)?;
        writeln!(out, "{}", line(&r, args.planted))?;
        let fails = args.failures.join(t.name());
        for (kind, list) in [("panic", r.panics.iter().map(|(m, i)| (m.clone(), i)).collect::<Vec<_>>()), ("broken", r.broken.iter().map(|(m, i)| (m.clone(), i)).collect()), ("hang", r.hangs.iter().map(|(s, i)| (format!("{s:.2} s"), i)).collect())] {
            for (msg, input) in list {
                let p = keep(&fails, &format!("{kind}-"), input)?;
                writeln!(out, "  {kind}: {} ({})", msg.chars().take(300).collect::<String>(), p.display())?;
            }
        }
        if args.save > 0 {
            let have = corpus_of(&dir)?.len();
            for input in r.found.iter().take(args.save.saturating_sub(have)) {
                keep(&dir, "", input)?;
            }
        }
        if !r.clean(args.planted) {
            bad.push(t.name());
        }
    }
    if !bad.is_empty() {
        bail!("fuzzing found problems in: {}", bad.join(", "));
    }
    Ok(())
}
