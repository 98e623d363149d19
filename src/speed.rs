//! Throughput measurement and the finishing-time forecast (pure).
//!
//! A chunk's time is the time between the `next` call that returned it and the
//! following `next` call: time spent computing, not waiting. The estimator
//! keeps cumulative counters updated on every chunk (two additions, nothing
//! else on the fast path) and, at each check, a sample of them; the speed is
//! measured over the samples that span the last `window` seconds of computing,
//! and the *steady* speed over a longer window from the same samples.

use std::collections::VecDeque;

/// Speed estimator of one rank.
#[derive(Clone, Debug)]
pub struct Speed {
    window: f64,
    /// The window of the steady speed (at least `window`).
    steady_window: f64,
    busy: f64,
    done: u64,
    /// Σ busy²/n over the chunks: with `busy` and `done`, the spread of
    /// one realisation's time.
    squares: f64,
    samples: VecDeque<(f64, u64)>,
    estimate: f64,
    steady: f64,
}

impl Speed {
    /// An estimator measuring over `window` seconds of computing time.
    pub fn new(window: f64) -> Self {
        Speed {
            window,
            steady_window: window,
            busy: 0.0,
            done: 0,
            squares: 0.0,
            samples: VecDeque::from([(0.0, 0)]),
            estimate: 0.0,
            steady: 0.0,
        }
    }

    /// Also measure the steady speed, over `window` seconds of computing
    /// ([`Speed::steady`]; no longer than the speed's own window is no
    /// different from it).
    pub fn with_steady_window(mut self, window: f64) -> Self {
        self.steady_window = window.max(self.window);
        self
    }

    /// Account a finished chunk of `n` realisations that took `busy` seconds.
    #[inline]
    pub fn record(&mut self, busy: f64, n: u64) {
        self.busy += busy;
        self.done += n;
        if n > 0 {
            self.squares += busy * busy / n as f64;
        }
    }

    /// Realisations done so far.
    pub fn done(&self) -> u64 {
        self.done
    }

    /// Seconds spent computing so far.
    pub fn busy(&self) -> f64 {
        self.busy
    }

    /// The standard deviation of one realisation's time, seconds, over the
    /// whole run (the realisations of a chunk counted as equally long, so
    /// chunks of many realisations hide some of it): realisations of random
    /// cost, and changes of speed, make it large.
    pub fn spread(&self) -> f64 {
        if self.done < 2 {
            return 0.0;
        }
        let mean = self.busy / self.done as f64;
        (self.squares / self.done as f64 - mean * mean)
            .max(0.0)
            .sqrt()
    }

    /// Take a sample and refresh the estimates; returns the speed.
    pub fn update(&mut self) -> f64 {
        let now = (self.busy, self.done);
        if self.samples.back().is_some_and(|&(b, _)| b < now.0) {
            self.samples.push_back(now);
        }
        // Keep exactly one sample at or before the start of the steady
        // window; the speed's window starts at the last sample at or
        // before its own start.
        while self.samples.len() > 2 && self.samples[1].0 <= now.0 - self.steady_window {
            self.samples.pop_front();
        }
        let start = self
            .samples
            .partition_point(|&(b, _)| b <= now.0 - self.window);
        self.estimate = self.over(self.samples[start.max(1) - 1], self.estimate);
        self.steady = self.over(self.samples[0], self.steady);
        self.estimate
    }

    /// The speed since the sample `(b0, d0)`, or over the whole run when
    /// nothing was done since; `last` when nothing was done at all.
    fn over(&self, (b0, d0): (f64, u64), last: f64) -> f64 {
        if self.busy > b0 && self.done > d0 {
            (self.done - d0) as f64 / (self.busy - b0)
        } else if self.busy > 0.0 && self.done > 0 {
            self.done as f64 / self.busy
        } else {
            last
        }
    }

    /// The current estimate, realisations per second (0 before any measurement).
    pub fn get(&self) -> f64 {
        self.estimate
    }

    /// The steady speed at the last [`Speed::update`]: over the steady
    /// window ([`Speed::with_steady_window`]).
    pub fn steady(&self) -> f64 {
        self.steady
    }
}

/// The forecast finishing time `τ = now + remaining / v`; infinite when the
/// speed is unknown and work remains.
pub fn forecast(now: f64, remaining: u64, speed: f64) -> f64 {
    if remaining == 0 {
        now
    } else if speed > 0.0 {
        now + remaining as f64 / speed
    } else {
        f64::INFINITY
    }
}

/// A usable speed: finite and positive, else zero.
pub(crate) fn usable(v: f64) -> f64 {
    if v.is_finite() && v > 0.0 { v } else { 0.0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constant_speed_is_measured_exactly() {
        let mut s = Speed::new(2.0);
        for _ in 0..40 {
            s.record(0.1, 5);
            s.update();
        }
        assert!((s.get() - 50.0).abs() < 1e-9);
        assert_eq!(s.done(), 200);
    }

    #[test]
    fn the_window_forgets_old_speed() {
        let mut s = Speed::new(1.0);
        for _ in 0..50 {
            s.record(0.1, 10); // 100/s
            s.update();
        }
        for _ in 0..15 {
            s.record(0.1, 2); // 20/s
            s.update();
        }
        assert!((s.get() - 20.0).abs() < 1e-9, "{}", s.get());
    }

    #[test]
    fn the_steady_speed_remembers_what_the_window_forgot() {
        let mut s = Speed::new(1.0).with_steady_window(4.0);
        for _ in 0..30 {
            s.record(0.1, 10); // 100/s
            s.update();
        }
        for _ in 0..20 {
            s.record(0.1, 2); // 20/s
            s.update();
        }
        // The last second is all at 20/s; the last four seconds hold two
        // at 100/s and two at 20/s: about 60/s (the window starts at the
        // last sample at or before its start).
        assert!((s.get() - 20.0).abs() < 1e-9, "{}", s.get());
        assert!((55.0..66.0).contains(&s.steady()), "{}", s.steady());
        // Without a steady window, the steady speed is the speed.
        let mut plain = Speed::new(1.0);
        plain.record(0.5, 10);
        plain.update();
        assert_eq!(plain.steady(), plain.get());
    }

    #[test]
    fn the_spread_of_realisation_times_is_measured() {
        let mut s = Speed::new(1.0);
        assert_eq!(s.spread(), 0.0);
        // Equal times: no spread; one realisation in two taking 0.3 s
        // instead of 0.1 s: a standard deviation of 0.1 s.
        for _ in 0..10 {
            s.record(0.1, 1);
        }
        assert!(s.spread() < 1e-6);
        for _ in 0..10 {
            s.record(0.3, 1);
        }
        assert!((s.spread() - 0.1).abs() < 1e-9, "{}", s.spread());
        // A chunk's realisations count as equally long.
        let mut c = Speed::new(1.0);
        c.record(0.4, 4);
        assert!(c.spread() < 1e-6);
    }

    #[test]
    fn no_measurement_means_no_speed() {
        let mut s = Speed::new(1.0);
        assert_eq!(s.update(), 0.0);
        assert_eq!(forecast(3.0, 10, 0.0), f64::INFINITY);
        assert_eq!(forecast(3.0, 0, 0.0), 3.0);
        assert_eq!(forecast(3.0, 10, 5.0), 5.0);
    }
}
