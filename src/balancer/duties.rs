//! The grid job's duties (DESIGN §11, §12): the deadline, the completion
//! journal and rank 0's progress line.

use super::context::Context;
use crate::config::Mode;
use crate::deadline::Deadline;
use crate::error::Result;
use crate::policy::Rank;
use crate::progress::{Figures, Progress};
use crate::resume::{Journal, Prior};
use crate::stats::Observables;
use std::ops::Range;

/// The deadline, the journal and the progress line of one rank.
pub(super) struct Duties {
    /// The deadline (DESIGN §11), if there is a walltime.
    deadline: Option<Deadline>,
    /// When this rank stops for the deadline (infinite: never).
    stop_at: f64,
    /// The completion journal, with a `job_name`.
    journal: Option<Journal>,
    /// The first of `stop_at` and the journal's next write: the one
    /// comparison the deadline and the journal add to the fast path.
    due: f64,
    /// Rank 0's progress line (DESIGN §12).
    progress: Option<Progress>,
}

impl Duties {
    pub(super) fn new(
        deadline: Option<Deadline>,
        mut journal: Option<Journal>,
        progress: Option<Progress>,
    ) -> Duties {
        let stop_at = deadline.as_ref().map_or(f64::INFINITY, Deadline::stop_at);
        let due = journal
            .as_mut()
            .map_or(f64::INFINITY, |j| j.due())
            .min(stop_at);
        Duties {
            deadline,
            stop_at,
            journal,
            due,
            progress,
        }
    }

    /// The deadline, if there is a walltime.
    pub(super) fn deadline(&self) -> Option<&Deadline> {
        self.deadline.as_ref()
    }

    /// When this rank stops for the deadline (infinite: never).
    pub(super) fn stop_at(&self) -> f64 {
        self.stop_at
    }

    /// The chunk handed out last is computed.
    pub(super) fn completed(&mut self) {
        if let Some(j) = &mut self.journal {
            j.completed();
        }
    }

    /// Whether the chunk handed out last is handed out whole.
    pub(super) fn chunk_whole(&self) -> bool {
        !self.journal.as_ref().is_some_and(Journal::has_pieces)
    }

    /// Ids the journal hands out before the balancer's own.
    pub(super) fn pending(&mut self) -> Option<Range<u64>> {
        self.journal.as_mut().and_then(Journal::pending)
    }

    /// The ids to compute for `ids` of the balancer's numbering.
    pub(super) fn hand_out(&mut self, ids: Range<u64>) -> Range<u64> {
        match &mut self.journal {
            Some(j) => j.hand_out(ids),
            None => ids,
        }
    }

    /// The deadline's stop or the journal's write is due at `now`.
    #[inline]
    pub(super) fn is_due(&self, now: f64) -> bool {
        now >= self.due
    }

    /// The earlier runs' results, when resuming.
    pub(super) fn prior(&self) -> Option<&Prior> {
        self.journal.as_ref().map(Journal::prior)
    }

    /// Before the first [`crate::Balancer::add`]: the journal's earlier
    /// runs added `n` observables per realisation too.
    pub(super) fn check_observables(&self, n: usize) -> Result<()> {
        match &self.journal {
            Some(j) => j.prior().check_observables(n),
            None => Ok(()),
        }
    }

    /// The deadline's stop or the journal's write is due at `now`: write
    /// the journal if due. True when this rank stops for the deadline now
    /// (unless it is `stopping` already); the caller stops.
    #[cold]
    pub(super) fn on_due(
        &mut self,
        ctx: &mut Context,
        observables: &Observables,
        now: f64,
        stopping: bool,
    ) -> bool {
        if let Some(j) = &mut self.journal
            && now >= j.due()
            && let Err(e) = j.write(now, observables)
        {
            let text = format!("the completion journal could not be written: {e}");
            if ctx.warner.warn(&text) {
                ctx.warnings.push(text.clone());
            }
            ctx.monitor.line(now, format_args!("warning {text}"));
        }
        self.due = self
            .journal
            .as_ref()
            .map_or(f64::INFINITY, Journal::due)
            .min(self.stop_at);
        if now < self.stop_at || stopping {
            return false;
        }
        let text = format!(
            "deadline: stopping at {now:.1} s, the walltime minus the margin \
             (on_deadline: Stop); the statistics cover the realisations completed"
        );
        if ctx.me() == 0 {
            crate::error::warn(0, &text);
        }
        ctx.monitor.line(now, format_args!("{text}"));
        true
    }

    /// A wave completed at `now` with `completed` ids done and `open` SOS
    /// (`over`: with the verdict): the progress line, the deadline's watch.
    pub(super) fn after_wave(
        &mut self,
        ctx: &mut Context,
        rank: &Rank,
        now: f64,
        (completed, open): (u64, u64),
        over: bool,
    ) {
        self.show_progress(ctx, rank, now, (completed, open), over);
        if self.deadline.is_some() {
            self.watch_deadline(ctx, rank, now, Some(completed), None);
        }
    }

    /// The plan applied at `now`, until `horizon`: the deadline's watch.
    pub(super) fn after_plan(&mut self, ctx: &mut Context, rank: &Rank, now: f64, horizon: f64) {
        if self.deadline.is_some() {
            self.watch_deadline(ctx, rank, now, None, Some(horizon));
        }
    }

    /// Rank 0: compare the job's forecast end (the plan's horizon when
    /// given, the job's rate over the recent waves with their completed
    /// count, and its own forecast when no rank helps another) with the
    /// deadline, and warn the first time it passes it.
    #[cold]
    fn watch_deadline(
        &mut self,
        ctx: &mut Context,
        rank: &Rank,
        now: f64,
        completed: Option<u64>,
        horizon: Option<f64>,
    ) {
        if ctx.me() != 0 {
            return;
        }
        let Some(d) = &mut self.deadline else {
            return;
        };
        if let Some(c) = completed {
            d.observe(now, c);
        }
        let own = (ctx.config.mode != Mode::Full && rank.speed() > 0.0)
            .then(|| crate::speed::forecast(now, rank.remaining(), rank.speed()));
        let Some(forecast) = [horizon, d.rate_forecast(), own]
            .into_iter()
            .flatten()
            .reduce(f64::max)
        else {
            return;
        };
        if let Some(w) = d.check(now, forecast) {
            crate::error::warn(0, &w.text);
            ctx.monitor.line(now, format_args!("warning {}", w.text));
            ctx.monitor.flush();
            ctx.warnings.push(w.text);
        }
    }

    /// Rank 0: the progress line if one is due, or the last one at the
    /// verdict, with the wave's figures (no file is read: on slow storage
    /// a read of the open index per line delayed rank 0's own work).
    #[cold]
    fn show_progress(
        &mut self,
        ctx: &Context,
        rank: &Rank,
        now: f64,
        (done, open): (u64, u64),
        over: bool,
    ) {
        let Some(p) = &mut self.progress else { return };
        let total = rank.total();
        let line = if over {
            p.last(done, total, now)
        } else if p.due(now) {
            let open = (ctx.config.mode == Mode::Full).then_some(open as usize);
            let end = rank.job_end();
            let figures = Figures {
                done,
                total,
                now,
                end,
                open,
            };
            p.line(&figures, chrono::Local::now())
        } else {
            None
        };
        if let Some(line) = line {
            use std::io::Write;
            let _ = std::io::stderr().lock().write_all(line.as_bytes());
        }
    }

    /// At `finish`, `elapsed` after the start: the journal's last write
    /// (a failure is a warning: the run's result stands) and its cost.
    pub(super) fn finish(&mut self, ctx: &mut Context, observables: &Observables, elapsed: f64) {
        let Some(j) = &mut self.journal else {
            return;
        };
        j.completed();
        if let Err(e) = j.write(elapsed, observables) {
            // A resumed run would compute this rank's last ids again.
            crate::error::warn(
                ctx.me(),
                &format!("the final write of the completion journal failed: {e}"),
            );
        }
        let (writes, mean) = j.cost();
        ctx.monitor.line(
            elapsed,
            format_args!("journal writes={writes} mean_write_ms={:.3}", mean * 1e3),
        );
    }
}
