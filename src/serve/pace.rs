//! The depth rule: a stream drafts while the tokens its drafts win per round exceed what drafting costs a round, measured; otherwise it pauses and probes again after a doubling number of rounds.
use std::time::Duration;

/// Rounds a stream waits before probing again after its first failed probe, and at most.
const FIRST_BACKOFF: usize = 4;
const LONGEST_BACKOFF: usize = 256;
/// The cost ratio assumed until both kinds of round were timed.
const ASSUMED_COST: f64 = 0.25;
/// Weight of the newest sample in every moving average.
const NEWEST: f64 = 0.5;
/// The share of a stream's rounds its probes may cost: a paused stream waits at least cost / this many rounds.
const PROBE_SHARE: f64 = 0.01;

/// Host-wide measurements: forward times of rounds with and without drafts, the draft pass's time, and what drafted rounds won across streams.
#[derive(Debug, Clone)]
pub struct Pace {
    plain: Option<f64>,
    drafted: Option<f64>,
    pass: Option<f64>,
    prior: f64,
}

/// One stream's part of the rule.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LanePace {
    /// Moving average of accepted drafts per drafted round.
    pub gain: f64,
    skip: usize,
    backoff: usize,
}

fn ema(old: Option<f64>, new: f64) -> f64 {
    old.map_or(new, |o| (1.0 - NEWEST) * o + NEWEST * new)
}

impl Default for Pace {
    fn default() -> Self {
        Pace { plain: None, drafted: None, pass: None, prior: 1.0 }
    }
}

impl Pace {
    /// A pace that starts from measured times: one plain decode forward, one verify window's forward, one draft pass.
    pub fn measured(plain: Duration, drafted: Duration, pass: Duration) -> Pace {
        Pace { plain: Some(plain.as_secs_f64()), drafted: Some(drafted.as_secs_f64()), pass: Some(pass.as_secs_f64()), prior: 1.0 }
    }

    /// Rounds a paused stream waits at least, so that its probes cost at most `PROBE_SHARE` of its rounds.
    fn least_wait(&self) -> usize {
        ((self.cost() / PROBE_SHARE).ceil() as usize).min(1 << 20)
    }

    /// What a drafted round costs beyond a plain one (its verify window and the draft pass that made it), as a share of a plain round.
    pub fn cost(&self) -> f64 {
        match (self.plain, self.drafted, self.pass) {
            (Some(p), Some(d), Some(x)) if p > 0.0 => ((d + x) / p - 1.0).max(0.0),
            _ => ASSUMED_COST,
        }
    }

    /// Times a draft pass.
    pub fn pass(&mut self, took: Duration) {
        self.pass = Some(ema(self.pass, took.as_secs_f64()));
    }

    /// Times a decode round's forward and checks (prompt chunks and the draft pass excluded): `drafted` when any stream's window carried drafts.
    pub fn timed(&mut self, took: Duration, drafted: bool) {
        let t = took.as_secs_f64();
        if drafted {
            self.drafted = Some(ema(self.drafted, t));
        } else {
            self.plain = Some(ema(self.plain, t));
        }
    }

    /// A new stream's state: drafting at once while drafts have paid lately, else after a wait.
    pub fn start(&self) -> LanePace {
        if self.prior > self.cost() {
            LanePace { gain: self.prior, skip: 0, backoff: 0 }
        } else {
            let wait = (4 * FIRST_BACKOFF).max(self.least_wait());
            LanePace { gain: self.prior, skip: wait, backoff: 4 * FIRST_BACKOFF }
        }
    }

    /// Whether `lane` drafts this round (a paused stream counts its wait down).
    pub fn drafts(&self, lane: &mut LanePace) -> bool {
        if lane.skip > 0 {
            lane.skip -= 1;
            return false;
        }
        true
    }

    /// A drafted round of `lane` accepted `accepted` drafts: the averages move, and a stream whose gain no longer beats the cost pauses.
    pub fn record(&mut self, lane: &mut LanePace, accepted: usize) {
        let a = accepted as f64;
        lane.gain = ema(Some(lane.gain), a);
        self.prior = ema(Some(self.prior), a);
        if lane.gain <= self.cost() {
            lane.backoff = (lane.backoff * 2).clamp(FIRST_BACKOFF, LONGEST_BACKOFF);
            lane.skip = lane.backoff.max(self.least_wait());
        } else {
            lane.backoff = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_that_win_keep_drafting_and_streams_that_lose_pause_ever_longer() {
        let mut pace = Pace::default();
        pace.timed(Duration::from_millis(10), false);
        pace.timed(Duration::from_millis(11), true);
        pace.pass(Duration::from_millis(2));
        assert!((pace.cost() - 0.3).abs() < 1e-9);
        let mut good = pace.start();
        for _ in 0..20 {
            assert!(pace.drafts(&mut good));
            pace.record(&mut good, 3);
        }
        let mut bad = pace.start();
        let mut drafted = 0;
        for _ in 0..200 {
            if pace.drafts(&mut bad) {
                drafted += 1;
                pace.record(&mut bad, 0);
            }
        }
        assert!((2..=10).contains(&drafted), "{drafted} drafted rounds of 200 at zero acceptance");
        let costly = Pace::measured(Duration::from_millis(10), Duration::from_millis(60), Duration::from_millis(50));
        let mut lane = costly.start();
        assert!((0..500).filter(|_| costly.drafts(&mut lane)).count() <= 1, "a stream drafts where a drafted round costs ten plain ones");
        let late = pace.start();
        assert!(late.skip > 0, "a new stream after a run of losses starts paused: {late:?}");
    }
}
