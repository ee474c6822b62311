//! The lane host: one thread owns the engine; each round drops abandoned jobs, admits queued jobs into free lanes, runs every live stream's rows (a decoding stream's window: its next token and its drafts) through one forward, samples each row with its own stream's sampler, keeps each window's accepted prefix, drafts the next windows, and streams the text out.
use super::cache::{prompt_key, PromptCache};
use super::job::{Command, Event, FinishReason, Job, JobError};
use super::lane::{Lane, Step};
use super::snapshot::{Snapshot, SnapshotDir};
use super::status::{LaneStatus, Status};
use crate::engine::{chunk_spans, Engine, EngineError, SeqId, Span, Work};
use crate::exec::Executor;
use crate::model::forward::LogitRows;
use crate::model::taps::Taps;
use crate::text::Tokenizer;
use std::collections::VecDeque;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How the lane host runs.
pub struct HostConfig {
    /// Lanes: streams decoding at once.
    pub parallel: usize,
    /// Positions per lane.
    pub context: usize,
    /// Most rows one round computes (decode rows first, then prompt chunks).
    pub round_tokens: usize,
    /// How long a job may wait for a lane.
    pub queue_timeout: Option<Duration>,
    /// Prompt-cache budget in bytes (0 = off).
    pub cache_bytes: usize,
    /// Snapshots on disk.
    pub snapshots: Option<SnapshotDir>,
    /// Most drafts a stream's window carries (0 = no drafts).
    pub draft_block: usize,
    /// Draft every round, past the depth rule.
    pub always_draft: bool,
    /// A stream whose reader has left its events waiting this long is cancelled.
    pub stall: Duration,
    /// A stream whose unread events pass this many bytes is cancelled.
    pub max_unsent: usize,
}

/// One decode lane's input this round: the next token, its drafts, and the mark that undoes them.
struct Window<E: Executor> {
    tokens: Vec<u32>,
    drafts: Vec<u32>,
    mark: Option<crate::model::Mark<E::Tensor>>,
}

/// The lane host over one engine.
pub struct Host<'t, 'm, 'c, E: Executor> {
    engine: Engine<'m, 'c, E>,
    tok: &'t Tokenizer,
    cfg: HostConfig,
    queue: VecDeque<Job>,
    lanes: Vec<Lane>,
    cache: PromptCache<SeqId>,
    status: Arc<Mutex<Status>>,
    drain: Option<Instant>,
    pace: super::pace::Pace,
    /// Prompt tokens computed and tokens generated since the start, published with the status.
    totals: (u64, u64),
    /// Whether snapshot writes are failing (the first failure is logged, the rest counted).
    snapshot_failing: bool,
    snapshot_errors: u64,
}

/// A failure that ends serving (the device is lost).
#[derive(Debug, thiserror::Error)]
#[error("the device is lost: {0}")]
pub struct Lost(pub String);

impl<'t, 'm, 'c, E: Executor> Host<'t, 'm, 'c, E> {
    /// A host with no jobs; loads the snapshots of `cfg.snapshots` into the prompt cache (refused files are logged and left).
    pub fn new(engine: Engine<'m, 'c, E>, tok: &'t Tokenizer, cfg: HostConfig, status: Arc<Mutex<Status>>) -> Self {
        Host::with_pace(engine, tok, cfg, status, super::pace::Pace::default())
    }

    /// A host whose depth rule starts from `pace` (the warm-up's timings).
    pub fn with_pace(engine: Engine<'m, 'c, E>, tok: &'t Tokenizer, cfg: HostConfig, status: Arc<Mutex<Status>>, pace: super::pace::Pace) -> Self {
        let cache = PromptCache::new(cfg.cache_bytes);
        let mut h = Host { engine, tok, cfg, queue: VecDeque::new(), lanes: Vec::new(), cache, status, drain: None, pace, totals: (0, 0), snapshot_failing: false, snapshot_errors: 0 };
        h.load_snapshots();
        h.publish();
        h
    }

    fn load_snapshots(&mut self) {
        let Some(dir) = &self.cfg.snapshots else { return };
        let torn = dir.remove_torn();
        if torn > 0 {
            eprintln!("snapshot: removed {torn} unfinished temporary files of writes cut short");
        }
        for (path, snap) in dir.read_all() {
            let loaded = snap.and_then(|s| {
                let seq = self.engine.restore(&s.state).map_err(|e| e.to_string())?;
                Ok((s, seq))
            });
            match loaded {
                Ok((s, seq)) => {
                    let n = s.key.len();
                    self.keep(s.key, seq, s.logits);
                    eprintln!("snapshot {}: resumed {n} tokens", path.display());
                }
                Err(e) => eprintln!("snapshot {}: refused: {e}", path.display()),
            }
        }
    }

    /// Serves commands until the senders are gone or a drain ends; `Err` when the device is lost.
    pub fn run(mut self, rx: Receiver<Command>) -> Result<(), Lost> {
        loop {
            if self.lanes.is_empty() && self.queue.is_empty() {
                if self.drain.is_some() {
                    return Ok(());
                }
                let wait = self.cfg.queue_timeout.unwrap_or(Duration::from_secs(3600));
                match rx.recv_timeout(wait) {
                    Ok(c) => self.command(c),
                    Err(RecvTimeoutError::Timeout) => continue,
                    Err(RecvTimeoutError::Disconnected) => return Ok(()),
                }
            }
            while let Ok(c) = rx.try_recv() {
                self.command(c);
            }
            self.expire();
            self.admit();
            self.sample_ready();
            self.leave_abandoned();
            if !self.lanes.is_empty() {
                self.round()?;
            }
            self.publish();
        }
    }

    fn command(&mut self, c: Command) {
        match c {
            Command::Submit(job) if self.drain.is_some() => {
                let _ = job.events.send(Event::Error(JobError::Unavailable("the server is draining".into())));
            }
            Command::Submit(job) if job.prompt.is_empty() || job.prompt.len() >= self.cfg.context => {
                let _ = job.events.send(Event::Error(JobError::Invalid(format!("the prompt has {} tokens; it needs 1 to {}", job.prompt.len(), self.cfg.context - 1))));
            }
            Command::Submit(job) => match super::images::images_fit(&job) {
                Ok(()) => self.queue.push_back(job),
                Err(e) => {
                    let _ = job.events.send(Event::Error(JobError::Invalid(e)));
                }
            },
            Command::Drain(deadline) => {
                self.drain = Some(deadline);
                for j in self.queue.drain(..) {
                    let _ = j.events.send(Event::Error(JobError::Unavailable("the server is draining".into())));
                }
            }
        }
    }

    /// Queued jobs past the queue timeout fail; at the drain deadline running streams are cancelled.
    fn expire(&mut self) {
        if let Some(t) = self.cfg.queue_timeout {
            let now = Instant::now();
            let (late, keep): (Vec<Job>, Vec<Job>) = self.queue.drain(..).partition(|j| now.duration_since(j.arrived) > t);
            self.queue = keep.into();
            for j in late {
                let _ = j.events.send(Event::Error(JobError::Unavailable(format!("no lane became free within the queue timeout of {} s", t.as_secs_f64()))));
            }
        }
        if self.drain.is_some_and(|d| Instant::now() >= d) {
            for lane in std::mem::take(&mut self.lanes) {
                let _ = lane.job.events.send(Event::Error(JobError::Unavailable("cancelled: the server shut down before the reply finished".into())));
                self.drop_lane(lane);
            }
        }
    }

    /// Moves queued jobs into free lanes, each resuming from its longest cached prefix.
    fn admit(&mut self) {
        while self.lanes.len() < self.cfg.parallel {
            let Some(job) = self.queue.pop_front() else { break };
            if job.events.is_closed() {
                continue;
            }
            let key = prompt_key(&job.prompt, &job.images);
            let spans: Vec<(usize, usize)> = job.images.iter().map(|i| (i.at, i.at + i.len)).collect();
            let hit = self.cache.longest_prefix_where(&key, |n| spans.iter().all(|&(a, b)| n <= a || n >= b)).map(|e| (e.key.len(), e.seq, e.logits.clone()));
            let seq = match &hit {
                Some((_, seq, _)) => self.engine.fork(*seq),
                None => self.engine.add().map_err(EngineError::from),
            };
            let seq = match seq {
                Ok(s) => s,
                Err(e) => {
                    let _ = job.events.send(Event::Error(JobError::Engine(format!("allocating the stream's state: {e}"))));
                    continue;
                }
            };
            let (cached, ready) = match hit {
                Some((n, _, logits)) => (n, (n == job.prompt.len()).then_some(logits)),
                None => (0, None),
            };
            {
                let mut st = self.status.lock().unwrap_or_else(|p| p.into_inner());
                st.cache_queries += job.prompt.len() as u64;
                st.cache_hits += cached as u64;
            }
            let mut job = job;
            let images = match super::images::run_tower(&mut self.engine, &mut job, cached) {
                Ok(v) => v,
                Err(e) => {
                    let _ = job.events.send(Event::Error(JobError::Engine(format!("the vision tower failed: {e}"))));
                    let _ = self.engine.remove(seq);
                    continue;
                }
            };
            let _ = job.events.send(Event::Started { cached_tokens: cached });
            let pace = self.pace.start();
            let mut lane = Lane::new(job, seq, cached, ready, pace);
            (lane.key, lane.images) = (key, images);
            self.lanes.push(lane);
        }
    }

    /// Samples the lanes whose logits came from the cache.
    fn sample_ready(&mut self) {
        let mut i = 0;
        while i < self.lanes.len() {
            if let Some(logits) = self.lanes[i].ready.take() {
                if self.step(i, &logits) {
                    continue;
                }
            }
            i += 1;
        }
    }

    fn leave_abandoned(&mut self) {
        for lane in std::mem::take(&mut self.lanes) {
            let (unsent, stalled) = (lane.job.events.unsent(), lane.job.events.stalled());
            if unsent > self.cfg.max_unsent || stalled > self.cfg.stall {
                let why = format!("cancelled: the client left {unsent} bytes unread for {:.1} s (--stall-seconds {}, --max-unsent-bytes {})", stalled.as_secs_f64(), self.cfg.stall.as_secs_f64(), self.cfg.max_unsent);
                eprintln!("{}: {why}", lane.job.id);
                let _ = lane.job.events.send(Event::Error(JobError::Unavailable(why)));
                self.drop_lane(lane);
            } else if lane.abandoned() {
                self.drop_lane(lane);
            } else {
                self.lanes.push(lane);
            }
        }
    }

    /// Samples lane `i` from `logits`; true when the lane left (finished or failed).
    fn step(&mut self, i: usize, logits: &[f32]) -> bool {
        let choice = self.lanes[i].choose(logits);
        self.commit(i, choice, logits)
    }

    /// Commits lane `i`'s chosen token; true when the lane left (finished or failed).
    fn commit(&mut self, i: usize, choice: Result<(u32, Option<crate::serve::TokenLogprob>), JobError>, logits: &[f32]) -> bool {
        let room = self.cfg.context;
        self.totals.1 += u64::from(choice.is_ok());
        match self.lanes[i].accept(choice, logits, self.tok, room) {
            Ok(Step::Continue) => false,
            Ok(Step::Finished(reason)) => {
                let lane = self.lanes.remove(i);
                self.end(lane, reason, logits);
                true
            }
            Err(e) => {
                let lane = self.lanes.remove(i);
                let _ = lane.job.events.send(Event::Error(e));
                self.drop_lane(lane);
                true
            }
        }
    }

    /// Finishes a lane; its state goes to the cache keyed by everything it consumed (not when a verify window left it ahead of its tokens).
    fn end(&mut self, mut lane: Lane, reason: FinishReason, logits: &[f32]) {
        self.free_images(&mut lane);
        let ahead = lane.ahead;
        let mut key = std::mem::take(&mut lane.key);
        let (_, seq, tokens) = lane.finish(reason, self.tok);
        key.extend(tokens[..tokens.len() - 1].iter().map(|&t| u64::from(t)));
        if !ahead && self.cache.budget() > 0 && !self.cache.contains(&key) {
            self.keep(key, seq, logits.to_vec());
        } else {
            let _ = self.engine.remove(seq);
        }
    }

    /// Puts `seq` in the cache (freeing what it evicts) and on disk when asked.
    fn keep(&mut self, key: Vec<u64>, seq: SeqId, logits: Vec<f32>) {
        let bytes = self.engine.resident_bytes(seq).unwrap_or(usize::MAX / 2) + logits.len() * 4;
        if !self.cache.fits(bytes) {
            let _ = self.engine.remove(seq);
            return;
        }
        if let Some(dir) = &self.cfg.snapshots {
            if let Ok(state) = self.engine.state_bytes(seq) {
                match dir.write(&Snapshot { key: key.clone(), logits: logits.clone(), state }) {
                    Err(_) if self.snapshot_failing => self.snapshot_errors += 1,
                    Err(e) => {
                        eprintln!("snapshot: {e}; the prompt cache keeps serving from memory, and further write errors are counted, not logged");
                        (self.snapshot_failing, self.snapshot_errors) = (true, 1);
                    }
                    Ok(_) if self.snapshot_failing => {
                        eprintln!("snapshot: writes work again after {} failed", self.snapshot_errors);
                        (self.snapshot_failing, self.snapshot_errors) = (false, 0);
                    }
                    Ok(_) => {}
                }
            }
        }
        for old in self.cache.insert(key, seq, logits, bytes) {
            let _ = self.engine.remove(old);
        }
    }

    /// One forward over every lane's rows: decode windows first (the next token and its drafts), then prompt chunks within `round_tokens`; then the windows are checked and the next drafts made.
    fn round(&mut self) -> Result<(), Lost> {
        let t0 = Instant::now();
        let mut budget = self.cfg.round_tokens.max(1);
        let mut plan: Vec<(usize, usize, usize)> = Vec::new();
        let mut windows: Vec<Window<E>> = Vec::new();
        let slots = self.engine.model.cfg.sliding_window;
        for (i, l) in self.lanes.iter_mut().enumerate() {
            let Some(next) = l.next else { continue };
            let room = l.job.max_tokens.saturating_sub(l.tokens.len() + 1).min(self.cfg.context.saturating_sub(l.position() + 1));
            let mut drafts = std::mem::take(&mut l.proposed);
            drafts.truncate(room.min(slots.saturating_sub(1)));
            let mut tokens = vec![next];
            tokens.extend(&drafts);
            plan.push((i, 0, tokens.len()));
            budget = budget.saturating_sub(tokens.len());
            windows.push(Window { tokens, drafts, mark: None });
        }
        let decode_only = self.lanes.iter().all(|l| !l.prefilling());
        let drafted = windows.iter().any(|w| !w.drafts.is_empty());
        for (i, l) in self.lanes.iter().enumerate() {
            if l.prefilling() && budget > 0 {
                let n = (l.job.prompt.len() - l.fed).min(budget);
                plan.push((i, l.fed, n));
                budget -= n;
            }
        }
        if plan.is_empty() {
            return Ok(());
        }
        for (w, &(i, _, _)) in windows.iter_mut().zip(&plan) {
            if !w.drafts.is_empty() {
                match self.engine.mark(self.lanes[i].seq, w.tokens.len()) {
                    Ok(m) => w.mark = Some(m),
                    Err(e) => return self.fail_round(&plan, e),
                }
            }
        }
        let spans: Vec<Vec<Span<'_>>> = plan
            .iter()
            .enumerate()
            .map(|(p, &(i, from, n))| match windows.get(p) {
                Some(w) => vec![Span::Tokens(&w.tokens[..])],
                None => chunk_spans(&self.lanes[i].job.prompt, &self.lanes[i].images, from, from + n),
            })
            .collect();
        let work: Vec<Work<'_>> = plan
            .iter()
            .enumerate()
            .zip(&spans)
            .map(|((p, &(i, _, _)), s)| Work { seq: self.lanes[i].seq, input: &s[..], rows: if windows.get(p).is_some_and(|w| w.tokens.len() > 1) { LogitRows::All } else { LogitRows::Last } })
            .collect();
        let mut out = self.engine.round(&work, &mut Taps::default());
        drop(work);
        if crate::testing::fault("device_round") {
            out = Err(EngineError::Fault("device_round"));
        }
        let logits = match out {
            Ok(l) => l,
            Err(e) => return self.fail_round(&plan, e),
        };
        // which lanes sample this round: one-row decoders, and prompts whose last chunk this was; windows are checked after
        let mut sampled: Vec<(usize, Vec<f32>)> = Vec::new();
        let mut checked: Vec<(SeqId, Vec<f32>, Window<E>)> = Vec::new();
        let mut windows = windows.into_iter();
        for (&(i, _, n), t) in plan.iter().zip(&logits) {
            let window = windows.next();
            let lane = &mut self.lanes[i];
            if lane.next.take().is_none() {
                lane.fed += n;
                self.totals.0 += n as u64;
                if lane.prefilling() {
                    continue;
                }
            }
            let v = match self.engine.ex.read(t) {
                Ok(v) => v,
                Err(e) => return self.fail_round(&plan, EngineError::from(e)),
            };
            match window {
                Some(w) if w.tokens.len() > 1 => checked.push((lane.seq, v, w)),
                _ => sampled.push((i, v)),
            }
        }
        drop(logits);
        for i in 0..self.lanes.len() {
            if !self.lanes[i].prefilling() {
                let images = std::mem::take(&mut self.lanes[i].images);
                super::images::free(&mut self.engine, images);
            }
        }
        // lanes choose their tokens in parallel (each from its own logits and seed), then commit in lane order
        let lanes = &self.lanes;
        let choices: Vec<_> = if sampled.len() == 1 {
            sampled.iter().map(|(i, v)| lanes[*i].choose(v)).collect()
        } else {
            std::thread::scope(|s| {
                let handles: Vec<_> = sampled.iter().map(|(i, v)| s.spawn(move || lanes[*i].choose(v))).collect();
                handles.into_iter().map(|h| h.join().unwrap_or_else(|_| Err(JobError::Engine("sampling panicked".into())))).collect()
            })
        };
        let seqs: Vec<SeqId> = self.lanes.iter().map(|l| l.seq).collect();
        for ((i, v), choice) in sampled.into_iter().zip(choices) {
            let seq = seqs[i];
            let Some(at) = self.lanes.iter().position(|l| l.seq == seq) else { continue };
            if self.lanes[at].tokens.is_empty() {
                self.snapshot_prompt(at, &v);
            }
            self.commit(at, choice, &v);
        }
        for (seq, v, w) in checked {
            self.check_window(seq, &v, w)?;
        }
        if decode_only {
            self.pace.timed(t0.elapsed(), drafted);
        }
        self.propose()
    }

    /// Commits a window's rows in order while each chosen token equals the draft fed after it; the state keeps the committed rows and forgets the rest.
    fn check_window(&mut self, seq: SeqId, v: &[f32], w: Window<E>) -> Result<(), Lost> {
        let vocab = v.len() / w.tokens.len().max(1);
        let k = w.drafts.len();
        let mut j = 0;
        loop {
            let Some(at) = self.lanes.iter().position(|l| l.seq == seq) else { return Ok(()) };
            let row = &v[j * vocab..(j + 1) * vocab];
            let choice = self.lanes[at].choose(row);
            let matched = j < k && choice.as_ref().is_ok_and(|c| c.0 == w.drafts[j]);
            self.lanes[at].ahead = j < k;
            if self.commit(at, choice, row) {
                return Ok(());
            }
            if !matched {
                break;
            }
            j += 1;
        }
        let Some(at) = self.lanes.iter().position(|l| l.seq == seq) else { return Ok(()) };
        let lane = &mut self.lanes[at];
        lane.ahead = false;
        lane.speculative.rounds += usize::from(k > 0);
        lane.speculative.drafted += k;
        lane.speculative.accepted += j;
        if k > 0 && lane.job.forced.is_none() {
            self.pace.record(&mut lane.pace, j);
        }
        if let Some(mark) = w.mark {
            if let Err(e) = self.engine.rewind(seq, mark, 1 + j) {
                return self.fail_round(&[(at, 0, w.tokens.len())], e);
            }
        }
        Ok(())
    }

    /// The next window's drafts of every decoding lane that may draft: forced ones from the expected reply, else one draft pass over all the others.
    fn propose(&mut self) -> Result<(), Lost> {
        if self.cfg.draft_block == 0 || !self.engine.drafts() {
            return Ok(());
        }
        let (k, vocab) = (self.cfg.draft_block, self.engine.model.cfg.vocab_size);
        let mut items = Vec::new();
        for (i, l) in self.lanes.iter_mut().enumerate() {
            let Some(next) = l.next.filter(|_| l.job.draft && !l.prefilling()) else { continue };
            if let Some(f) = &l.job.forced {
                l.proposed = f.propose(l.tokens.len(), k, vocab);
            } else if self.engine.can_draft(l.seq) && (self.cfg.always_draft || self.pace.drafts(&mut l.pace)) {
                items.push((i, l.seq, next));
            }
        }
        if items.is_empty() {
            return Ok(());
        }
        let asks: Vec<(SeqId, u32)> = items.iter().map(|&(_, s, t)| (s, t)).collect();
        let t0 = Instant::now();
        let out = self.engine.draft(&asks, &mut Taps::default());
        self.pace.pass(t0.elapsed());
        match out {
            Ok(drafts) => {
                for ((i, _, _), d) in items.into_iter().zip(drafts) {
                    self.lanes[i].proposed = d.tokens;
                }
                Ok(())
            }
            Err(e) => {
                eprintln!("drafting failed, the streams continue undrafted this round: {e}");
                Ok(())
            }
        }
    }

    /// A prompt just filled: a copy of its state goes to the cache keyed by the prompt.
    fn snapshot_prompt(&mut self, at: usize, logits: &[f32]) {
        let l = &self.lanes[at];
        if self.cache.budget() == 0 || self.cache.contains(&l.key) {
            return;
        }
        let (seq, key) = (l.seq, l.key.clone());
        let Ok(copy) = self.engine.snapshot(seq) else { return };
        let bytes = self.engine.resident_bytes(copy).unwrap_or(usize::MAX / 2) + logits.len() * 4;
        if !self.cache.fits(bytes) {
            let _ = self.engine.remove(copy);
            return;
        }
        self.keep(key, copy, logits.to_vec());
    }

    /// A failed round fails its streams; when the device no longer answers, serving ends.
    fn fail_round(&mut self, plan: &[(usize, usize, usize)], e: EngineError) -> Result<(), Lost> {
        let msg = format!("the engine failed in a round: {e}");
        eprintln!("{msg}");
        let hit: Vec<SeqId> = plan.iter().map(|&(i, _, _)| self.lanes[i].seq).collect();
        for lane in std::mem::take(&mut self.lanes) {
            if hit.contains(&lane.seq) {
                let _ = lane.job.events.send(Event::Error(JobError::Engine(msg.clone())));
                self.drop_lane(lane);
            } else {
                self.lanes.push(lane);
            }
        }
        let probe = self.engine.ex.zeros(1, 1).and_then(|t| self.engine.ex.read(&t));
        match probe {
            Ok(_) => Ok(()),
            Err(p) => {
                let reason = format!("{msg}; the device does not answer: {p}");
                self.status.lock().unwrap_or_else(|p| p.into_inner()).failure = Some(reason.clone());
                for lane in std::mem::take(&mut self.lanes) {
                    let _ = lane.job.events.send(Event::Error(JobError::Engine(reason.clone())));
                }
                Err(Lost(reason))
            }
        }
    }

    /// Frees a lane's image embeddings.
    fn free_images(&mut self, lane: &mut Lane) {
        super::images::free(&mut self.engine, std::mem::take(&mut lane.images));
    }

    /// Frees everything a lane holds in the engine.
    fn drop_lane(&mut self, mut lane: Lane) {
        self.free_images(&mut lane);
        let _ = self.engine.remove(lane.seq);
    }

    /// Copies the lanes, queue and cache figures into the shared status.
    fn publish(&self) {
        let mut st = self.status.lock().unwrap_or_else(|p| p.into_inner());
        st.lanes = self
            .lanes
            .iter()
            .map(|l| LaneStatus { id: l.job.id.clone(), prefilling: l.prefilling(), position: l.fed + l.tokens.len(), prompt_tokens: l.job.prompt.len(), generated: l.tokens.len(), since: l.admitted })
            .collect();
        st.waiting = self.queue.len();
        st.cache_bytes = self.cache.bytes();
        st.cache_budget = self.cache.budget();
        st.cache_entries = self.cache.len();
        (st.prefilled_total, st.generated_total) = self.totals;
        st.ready = true;
    }
}
