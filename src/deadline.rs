//! The deadline (DESIGN §11), the pure part: where the walltime comes from,
//! the forecast of the job's end that rank 0 can make without an extra
//! collective, and what to do when that forecast passes the walltime minus
//! the margin.
//!
//! Rank 0 knows, at no cost:
//!
//! - the horizon `T_e` of Algorithm 1's plan: when every rank should finish
//!   if the speeds measured in the warm-up hold (the first forecast, right
//!   after the warm-up);
//! - the completed count summed over the ranks by every termination wave
//!   ([`crate::verdict::Words`]): its growth over a recent window is the
//!   job's rate, and `now + (total − completed) / rate` the forecast end;
//! - its own forecast `now + remaining / speed`, which bounds the end from
//!   below when no rank helps another (modes `Static` and `Warmup`).
//!
//! With `on_deadline: Stop` every rank stops taking new realisations at the
//! walltime minus the margin, on its own clock (the ranks share the common
//! start of the run), through the same path as `soslb_stop`.

use crate::config::OnDeadline;
use std::collections::VecDeque;

/// Where the walltime came from, for the messages.
#[derive(Clone, Debug, PartialEq)]
pub enum Source {
    /// The config's `walltime` (or `SOSLB_WALLTIME`).
    Config,
    /// A variable of the batch system, e.g. `SLURM_JOB_END_TIME`.
    Batch(&'static str),
    /// The batch system asked by rank 0 ([`crate::batch`]), e.g.
    /// `Slurm: squeue -j 42`.
    Asked(String),
}

/// The job's deadline, in seconds since the run's common start.
#[derive(Clone, Debug)]
pub struct Deadline {
    walltime: f64,
    margin: f64,
    source: Source,
    action: OnDeadline,
    total: u64,
    /// `(time, completed)` of the recent waves, oldest first.
    samples: VecDeque<(f64, u64)>,
    window: f64,
    warned: bool,
}

/// The margin when the config sets none: 60 s, or a tenth of the time left
/// to the walltime when that is less.
pub fn default_margin(left: f64) -> f64 {
    (left / 10.0).clamp(0.0, 60.0)
}

/// The walltime of this run in seconds since its start, and its source: the
/// earlier of the config's (`walltime` seconds after the first init of the
/// process, which was `since_first_init` seconds ago) and the batch
/// system's (`batch`: where it came from and the seconds left until its end).
pub fn walltime(
    config: Option<f64>,
    since_first_init: f64,
    batch: Option<(Source, f64)>,
) -> Option<(f64, Source)> {
    let from_config = config.map(|w| (w - since_first_init, Source::Config));
    let from_batch = batch.map(|(source, left)| (left, source));
    match (from_config, from_batch) {
        (Some(c), Some(b)) => Some(if b.0 < c.0 { b } else { c }),
        (c, b) => c.or(b),
    }
}

/// Rank 0's warning: the forecast end passes the walltime minus the margin.
#[derive(Clone, Debug, PartialEq)]
pub struct Warning {
    /// The forecast end, seconds since the start.
    pub forecast: f64,
    /// The text for stderr and the monitor log.
    pub text: String,
}

impl Deadline {
    /// A deadline at `walltime` seconds since the start (from `source`),
    /// kept `margin` seconds clear, for a run of `total` realisations. The
    /// job's rate is measured over the waves of the last `window` seconds.
    pub fn new(
        walltime: f64,
        margin: f64,
        source: Source,
        action: OnDeadline,
        total: u64,
        window: f64,
    ) -> Deadline {
        Deadline {
            walltime,
            margin,
            source,
            action,
            total,
            samples: VecDeque::new(),
            window,
            warned: false,
        }
    }

    /// The walltime minus the margin, seconds since the start.
    pub fn limit(&self) -> f64 {
        self.walltime - self.margin
    }

    /// When the ranks stop taking new realisations: the limit with
    /// `on_deadline: Stop`, never with `Warn`.
    pub fn stop_at(&self) -> f64 {
        match self.action {
            OnDeadline::Stop => self.limit(),
            OnDeadline::Warn => f64::INFINITY,
        }
    }

    /// A wave completed at `now` with `completed` realisations over all ranks.
    pub fn observe(&mut self, now: f64, completed: u64) {
        self.samples.push_back((now, completed));
        // Keep one sample at least `window` old, so that the rate spans it.
        while self.samples.len() > 2 && now - self.samples[1].0 >= self.window {
            self.samples.pop_front();
        }
    }

    /// The forecast end from the job's rate over the recent waves: `None`
    /// until two waves some time apart have seen progress.
    pub fn rate_forecast(&self) -> Option<f64> {
        let (&(t0, c0), &(t1, c1)) = (self.samples.front()?, self.samples.back()?);
        if t1 - t0 <= 0.0 || c1 <= c0 {
            return None;
        }
        let rate = (c1 - c0) as f64 / (t1 - t0);
        Some(t1 + self.total.saturating_sub(c1) as f64 / rate)
    }

    /// Compare a forecast end with the limit: the warning, the first time it
    /// passes it (then never again).
    pub fn check(&mut self, now: f64, forecast: f64) -> Option<Warning> {
        if self.warned || forecast.partial_cmp(&self.limit()) != Some(std::cmp::Ordering::Greater) {
            return None;
        }
        self.warned = true;
        let source = match &self.source {
            Source::Config => "the config's walltime".to_string(),
            Source::Batch(var) => format!("from {var}"),
            Source::Asked(how) => format!("from {how}"),
        };
        let forecast_text = if forecast.is_finite() {
            format!("{forecast:.1} s")
        } else {
            "never (no progress)".to_string()
        };
        let then = match self.action {
            OnDeadline::Warn => format!(
                "the job runs on (on_deadline: Warn) and may be killed at the walltime; with \
                 on_deadline: Stop the ranks would stop taking realisations at {:.1} s",
                self.limit()
            ),
            OnDeadline::Stop => format!(
                "the ranks stop taking realisations at {:.1} s (on_deadline: Stop); the \
                 statistics will cover the realisations completed by then",
                self.limit()
            ),
        };
        Some(Warning {
            forecast,
            text: format!(
                "deadline: at {now:.1} s the job's forecast end is {forecast_text} after the \
                 start, past the walltime of {:.1} s ({source}) minus the margin of {:.1} s; {then}",
                self.walltime, self.margin
            ),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deadline(action: OnDeadline) -> Deadline {
        Deadline::new(100.0, 10.0, Source::Config, action, 1000, 5.0)
    }

    #[test]
    fn the_earlier_walltime_wins_and_the_config_counts_from_the_first_init() {
        assert_eq!(walltime(None, 3.0, None), None);
        assert_eq!(
            walltime(Some(100.0), 30.0, None),
            Some((70.0, Source::Config))
        );
        let slurm = Some((Source::Batch("SLURM_JOB_END_TIME"), 50.0));
        assert_eq!(
            walltime(Some(100.0), 30.0, slurm.clone()),
            Some((50.0, Source::Batch("SLURM_JOB_END_TIME")))
        );
        assert_eq!(
            walltime(Some(60.0), 30.0, slurm),
            Some((30.0, Source::Config))
        );
        let asked = Some((Source::Asked("Slurm: squeue -j 42".into()), 40.0));
        assert_eq!(
            walltime(None, 0.0, asked),
            Some((40.0, Source::Asked("Slurm: squeue -j 42".into())))
        );
        assert_eq!(default_margin(3600.0), 60.0);
        assert_eq!(default_margin(20.0), 2.0);
    }

    #[test]
    fn the_rate_forecast_follows_the_recent_waves() {
        let mut d = deadline(OnDeadline::Warn);
        assert_eq!(d.rate_forecast(), None);
        d.observe(1.0, 100);
        assert_eq!(d.rate_forecast(), None);
        d.observe(2.0, 100);
        assert_eq!(d.rate_forecast(), None, "no progress, no rate");
        d.observe(3.0, 300);
        // 200 in 2 s: 100/s, 700 left at t = 3.
        assert_eq!(d.rate_forecast(), Some(10.0));
        // The job slows down to 10/s: after the window only the slow rate counts.
        for k in 1..=20 {
            d.observe(3.0 + k as f64, 300 + 10 * k);
        }
        let f = d.rate_forecast().unwrap();
        assert!((f - (23.0 + 500.0 / 10.0)).abs() < 1e-9, "{f}");
    }

    #[test]
    fn a_late_forecast_warns_once_with_the_numbers() {
        let mut d = deadline(OnDeadline::Warn);
        assert_eq!(d.stop_at(), f64::INFINITY);
        assert_eq!(d.check(1.0, 90.0), None, "exactly at the limit is in time");
        let w = d.check(2.0, 95.5).unwrap();
        assert_eq!(w.forecast, 95.5);
        for part in ["95.5 s", "100.0 s", "margin of 10.0 s", "on_deadline: Warn"] {
            assert!(w.text.contains(part), "{part} in {}", w.text);
        }
        assert_eq!(d.check(3.0, 120.0), None, "once");
        let mut s = deadline(OnDeadline::Stop);
        assert_eq!(s.stop_at(), 90.0);
        let w = s.check(1.0, f64::INFINITY).unwrap();
        assert!(
            w.text.contains("never") && w.text.contains("stop taking realisations at 90.0 s"),
            "{}",
            w.text
        );
        let mut b = Deadline::new(
            50.0,
            5.0,
            Source::Batch("SLURM_JOB_END_TIME"),
            OnDeadline::Warn,
            10,
            1.0,
        );
        assert!(
            b.check(0.0, 46.0)
                .unwrap()
                .text
                .contains("SLURM_JOB_END_TIME")
        );
        let how = "Slurm: squeue -j 42";
        let mut a = Deadline::new(
            50.0,
            5.0,
            Source::Asked(how.into()),
            OnDeadline::Stop,
            10,
            1.0,
        );
        let text = a.check(0.0, 46.0).unwrap().text;
        assert!(text.contains(&format!("(from {how})")), "{text}");
    }
}
