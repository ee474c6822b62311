//! The driver: runs a target's corpus, then mutated inputs, keeping those that reach a new label; catches panics, times every input, stops at its budget.
use super::mutate::{mutate, Rng};
use super::Target;
use std::collections::HashSet;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// An input that takes longer than this is a hang.
pub const HANG: Duration = Duration::from_secs(1);
/// A run whose input has not returned after this long saves the input and ends the process.
const STUCK: Duration = Duration::from_secs(20);
/// Most inputs kept per kind of failure.
const KEEP: usize = 8;
/// Most corpus entries; past it a new entry replaces a random one.
const MAX_CORPUS: usize = 4096;

/// When a run stops: the first of its executions or seconds.
#[derive(Clone, Copy, Debug)]
pub struct Budget {
    /// Most executions.
    pub execs: u64,
    /// Most seconds.
    pub seconds: f64,
}

/// What a run did and found.
#[derive(Debug, Default)]
pub struct Report {
    /// The target.
    pub target: String,
    /// Inputs run.
    pub execs: u64,
    /// Seconds taken.
    pub seconds: f64,
    /// Corpus entries at the start and at the end.
    pub corpus: (usize, usize),
    /// Distinct labels reached.
    pub labels: usize,
    /// Panics other than the planted bug: the message and the input.
    pub panics: Vec<(String, Vec<u8>)>,
    /// Inputs over [`HANG`]: seconds and the input.
    pub hangs: Vec<(f64, Vec<u8>)>,
    /// Broken properties: the message and the input.
    pub broken: Vec<(String, Vec<u8>)>,
    /// Counts of each kind, beyond the inputs kept.
    pub counts: (u64, u64, u64),
    /// The execution that reached the planted bug, when it was switched on and found.
    pub planted_at: Option<u64>,
    /// Inputs that reached a new label (for the corpus).
    pub found: Vec<Vec<u8>>,
    /// The slowest input's seconds.
    pub slowest: f64,
}

impl Report {
    /// Whether the run found nothing wrong (and, with the planted bug on, found it).
    pub fn clean(&self, planted: bool) -> bool {
        self.counts == (0, 0, 0) && (!planted || self.planted_at.is_some())
    }
}

static LAST_PANIC: Mutex<Option<String>> = Mutex::new(None);
static QUIET: AtomicBool = AtomicBool::new(false);

/// Replaces the panic hook with one that records the message silently while a run is on.
fn install_hook() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !QUIET.load(Ordering::Relaxed) {
                return previous(info);
            }
            let p = info.payload();
            let msg = p.downcast_ref::<&str>().map(|s| s.to_string()).or_else(|| p.downcast_ref::<String>().cloned()).unwrap_or_else(|| "panic".into());
            let at = info.location().map(|l| format!(" at {}:{}", l.file(), l.line())).unwrap_or_default();
            *LAST_PANIC.lock().unwrap_or_else(|e| e.into_inner()) = Some(format!("{msg}{at}"));
        }));
    });
}

/// Fuzzes `target` from `corpus` (plus its seeds) until `budget`; with `planted`, its planted bug is on and the run stops when it is found.
pub fn fuzz(target: &mut dyn Target, corpus: Vec<Vec<u8>>, budget: Budget, seed: u64, planted: bool) -> Result<Report, String> {
    install_hook();
    crate::testing::plant(planted.then_some(target.name()))?;
    QUIET.store(true, Ordering::Relaxed);
    let r = run(target, corpus, budget, seed, planted);
    QUIET.store(false, Ordering::Relaxed);
    let _ = crate::testing::plant(None);
    Ok(r)
}

fn run(target: &mut dyn Target, mut corpus: Vec<Vec<u8>>, budget: Budget, seed: u64, planted: bool) -> Report {
    corpus.extend(target.seeds());
    let dict = target.dictionary();
    let json = target.json();
    let mut rep = Report { target: target.name().to_string(), ..Default::default() };
    let mut labels = HashSet::new();
    let show = std::env::var_os("LOCKSTEP_FUZZ_LABELS").is_some();
    let mut rng = Rng::new(seed);
    let started = Instant::now();
    let watch = Watchdog::start(target.name());
    let initial = std::mem::take(&mut corpus);
    rep.corpus.0 = initial.len();
    let starts = initial.clone();
    let mut queue = initial.into_iter();
    loop {
        let input = match queue.next() {
            Some(i) => i,
            None => {
                if rep.execs >= budget.execs || started.elapsed().as_secs_f64() >= budget.seconds || corpus.is_empty() {
                    break;
                }
                // a quarter of the inputs grow from where the run started, so a full corpus cannot bury the seeds
                let pool = if rng.one_in(4) && !starts.is_empty() { &starts } else { &corpus };
                let mut i = pool[rng.below(pool.len())].clone();
                mutate(&mut rng, &mut i, &corpus, &dict, json);
                i
            }
        };
        rep.execs += 1;
        watch.begin(&input);
        let t = Instant::now();
        let out = catch_unwind(AssertUnwindSafe(|| target.run(&input)));
        let took = t.elapsed();
        watch.end();
        rep.slowest = rep.slowest.max(took.as_secs_f64());
        if took > HANG {
            rep.counts.1 += 1;
            if rep.hangs.len() < KEEP {
                rep.hangs.push((took.as_secs_f64(), input.clone()));
            }
        }
        match out {
            Ok(Ok(label)) => {
                if show && !labels.contains(&label) {
                    eprintln!("label {label}");
                }
                if labels.insert(label) {
                    if corpus.len() < MAX_CORPUS {
                        corpus.push(input.clone());
                    } else {
                        let i = rng.below(corpus.len());
                        corpus[i] = input.clone();
                    }
                    if rep.found.len() < MAX_CORPUS {
                        rep.found.push(input);
                    }
                }
            }
            Ok(Err(msg)) => {
                rep.counts.2 += 1;
                if rep.broken.len() < KEEP {
                    rep.broken.push((msg, input));
                }
            }
            Err(_) => {
                let msg = LAST_PANIC.lock().unwrap_or_else(|e| e.into_inner()).take().unwrap_or_else(|| "panic".into());
                if planted && msg.starts_with("planted bug") {
                    rep.planted_at = Some(rep.execs);
                    rep.found.push(input);
                    break;
                }
                rep.counts.0 += 1;
                if rep.panics.len() < KEEP {
                    rep.panics.push((msg, input));
                }
            }
        }
    }
    rep.seconds = started.elapsed().as_secs_f64();
    rep.corpus.1 = corpus.len();
    rep.labels = labels.len();
    rep
}

/// Watches the input in flight: one stuck past [`STUCK`] is written to a file and the process ends.
struct Watchdog {
    since: Arc<AtomicU64>,
    input: Arc<Mutex<Vec<u8>>>,
    stop: Arc<AtomicBool>,
    origin: Instant,
}

impl Watchdog {
    fn start(name: &'static str) -> Watchdog {
        let w = Watchdog { since: Arc::default(), input: Arc::default(), stop: Arc::default(), origin: Instant::now() };
        let (since, input, stop, origin) = (w.since.clone(), w.input.clone(), w.stop.clone(), w.origin);
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(200));
                let s = since.load(Ordering::Relaxed);
                if s != 0 && origin.elapsed().as_millis() as u64 > s + STUCK.as_millis() as u64 {
                    let path = std::env::temp_dir().join(format!("lockstep-fuzz-{name}-stuck.bin"));
                    let _ = std::fs::write(&path, &*input.lock().unwrap_or_else(|e| e.into_inner()));
                    eprintln!("fuzz {name}: an input has run for over {} s (a hang); it is in {}", STUCK.as_secs(), path.display());
                    std::process::exit(3);
                }
            }
        });
        w
    }

    fn begin(&self, input: &[u8]) {
        let mut g = self.input.lock().unwrap_or_else(|e| e.into_inner());
        g.clear();
        g.extend_from_slice(input);
        self.since.store(self.origin.elapsed().as_millis() as u64 + 1, Ordering::Relaxed);
    }

    fn end(&self) {
        self.since.store(0, Ordering::Relaxed);
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}
