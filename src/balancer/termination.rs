//! The shell's side of the termination ([`crate::verdict`]): the warm-up
//! exchange, the waves, this rank's failure or stop, the warning when a
//! wave waits long, and the verdict.

use super::context::Context;
use super::notices::Notices;
use crate::comm::{Comm, Gather, Wave};
use crate::error::{Error, Result, code};
use crate::plan::WarmupReport;
use crate::policy::Rank;
use crate::topology::Topology;
use crate::verdict::{Job, Judge, Status, Verdict, Words};
use std::ops::Range;
use std::path::Path;
use std::sync::Arc;

/// How often a waiting rank tests the termination wave, seconds: from the
/// first, doubling while the wave waits for others, up to the second; near
/// the job's forecast end, never less often than the first
/// ([`Termination::test_cap`]). Each wave's reduction advances
/// only when its ranks test it: at up to 20 ms, the verdict came about
/// 0.18 s after the last realisation (emulator, sites16-one, 16 ranks); at
/// up to 5 ms, 0.01 to 0.03 s; at up to 2 ms, the run ended 58 ms after its
/// last realisation where it did 78 ms after at 5 ms (the end of `finish`
/// included), and the verdict came 11 to 22 ms after the last realisation;
/// at 0.5 ms, 4 to 7 ms.
pub(super) const TEST_INTERVAL: (f64, f64) = (0.0005, 0.002);

/// How often a busy rank tests the wave in flight, seconds. A non-blocking
/// reduction advances only when its ranks call MPI, so this sets how fast a
/// wave completes; joining a new wave waits for the next check.
pub(crate) const BUSY_TEST_INTERVAL: f64 = 0.01;

/// The shell's side of the termination: waves, this rank's failure or stop,
/// and the verdict.
pub(super) struct Termination {
    judge: Judge,
    wave: Option<Wave>,
    /// When a busy rank next joins a wave (at its checks).
    next_wave: f64,
    /// When a busy rank next tests the wave in flight.
    pub(super) next_test: f64,
    /// The warm-up exchange is behind (or there is none). Waves start only
    /// then, so that every rank makes the collectives in the same order.
    pub(super) exchanged: bool,
    /// The warm-up exchange in flight, while this rank computes its reserve.
    pub(super) gather: Option<Gather>,
    /// This rank's own failure (code, message), announced with the next wave.
    pub(super) failure: Option<(i32, String)>,
    /// The program asked to stop.
    pub(super) stop: bool,
    pub(super) verdict: Option<Verdict>,
    /// After [`Verdict::Failed`]: the failed rank, its code and message.
    error: Option<(usize, i32, String)>,
    /// After [`Verdict::Lost`]: the claim file that lost the ids, if a
    /// rank found one.
    pub(super) lost_in: Option<String>,
    /// Since when this rank waits for a wave, and when it warns next.
    waiting: Option<(f64, f64)>,
    /// Who said they wait, while a wave waits.
    pub(super) notices: Notices,
    /// The time of the wave of the last host transfers planned
    /// ([`crate::transfer::planned`]; the same on every rank).
    planned: f64,
    /// Waves completed.
    pub(super) waves: u64,
    /// Until when a waiting rank tests the wave at [`TEST_INTERVAL`]'s
    /// first: set once, near the job's forecast end ([`Termination::test_cap`]).
    test_fast_until: Option<f64>,
}

/// What testing the wave in flight found.
pub(super) enum Tested {
    /// No wave is in flight.
    Idle,
    /// The wave waits for other ranks.
    Pending,
    /// The wave completed: the verdict, if any, and the job's view.
    Complete(Option<Verdict>, Job),
}

/// The warm-up exchange, completed.
pub(super) struct Exchanged {
    /// A failed or stopping rank made it a verdict.
    pub(super) verdict: Option<Verdict>,
    /// Every rank's warm-up report, rank by rank.
    pub(super) reports: Vec<WarmupReport>,
}

impl Termination {
    /// Before any wave, for `total` ids over `ranks` ranks; `exchanged`
    /// when there is no warm-up exchange ahead.
    pub(super) fn new(total: u64, ranks: usize, exchanged: bool) -> Termination {
        Termination {
            judge: Judge::new(total, ranks),
            wave: None,
            next_wave: 0.0,
            next_test: 0.0,
            exchanged,
            gather: None,
            failure: None,
            stop: false,
            verdict: None,
            error: None,
            lost_in: None,
            waiting: None,
            notices: Notices::new(),
            planned: f64::NEG_INFINITY,
            waves: 0,
            test_fast_until: None,
        }
    }

    /// The longest pause between two tests of the wave: [`TEST_INTERVAL`]'s
    /// first from a check `interval` before the job's forecast end (as first
    /// seen that close) to two check intervals after it, when the wave that
    /// ends the job may be in flight and a rank waits for the others' tests;
    /// else its second. A job that overruns its forecast by more is held up
    /// (by a straggler, a lock held from outside), its verdict not at hand:
    /// tested every 0.5 ms for as long as a lock was held from outside for
    /// 4 s, 15 waiting ranks used 2.5 s of CPU in 7.7 s, against 1.4 s.
    pub(super) fn test_cap(&mut self, now: f64, interval: f64, job_end: f64) -> f64 {
        if self.test_fast_until.is_none() && now + interval >= job_end {
            self.test_fast_until = Some(job_end + 2.0 * interval);
        }
        match self.test_fast_until {
            Some(until) if now <= until => TEST_INTERVAL.0,
            _ => TEST_INTERVAL.1,
        }
    }

    /// What `next` returns once there is a verdict (of a job of `total`
    /// ids whose run directory is `job_dir`).
    pub(super) fn outcome(&self, job_dir: &Path, total: u64) -> Result<Option<Range<u64>>> {
        match &self.verdict {
            Some(Verdict::Done | Verdict::Stopped) => Ok(None),
            Some(Verdict::Failed { .. }) => {
                let (rank, code, message) = self.error.clone().unwrap_or_default();
                Err(Error::Rank {
                    rank,
                    code,
                    message,
                })
            }
            Some(Verdict::Lost { completed }) => Err(Error::Corrupt {
                path: job_dir.to_path_buf(),
                reason: format!(
                    "the ranks computed {completed} of {total} realisations and none owns any \
                     more: ids were lost{}",
                    (self.lost_in.as_ref()).map_or(
                        " (a signal file destroyed or replaced during the run?); see the monitor \
                         logs"
                            .into(),
                        |found| format!(": {found}")
                    )
                ),
            }),
            None => Err(Error::Internal("no verdict yet".into())),
        }
    }

    /// Record this rank's failure (the first one counts); the next wave
    /// announces it.
    pub(super) fn fail(&mut self, ctx: &mut Context, e: &Error) {
        let t = ctx.now();
        ctx.monitor
            .line(t, format_args!("failed code={} {e}", e.code()));
        ctx.monitor.flush();
        self.failure.get_or_insert((e.code(), e.to_string()));
    }

    /// This rank's contribution to a wave; `sending` while host transfers
    /// it sent are on their way.
    pub(super) fn status(&self, rank: &Rank, sending: bool, now: f64) -> Status {
        let status = rank.status(now);
        Status {
            busy: status.busy || sending,
            failed: self.failure.is_some(),
            stop: self.stop,
            ..status
        }
    }

    /// Test the wave in flight: once complete, judge it and read the job's
    /// view from it, with the host transfers planned at it.
    pub(super) fn test_wave(&mut self, rank: &Rank) -> Tested {
        let Some(wave) = &mut self.wave else {
            return Tested::Idle;
        };
        let Some(words) = wave.test() else {
            return Tested::Pending;
        };
        let verdict = self.judge.judge(words);
        self.waves += 1;
        let mut job = words.job(rank.topology());
        let (topology, params) = (rank.topology(), rank.params());
        if let Some(moves) = crate::transfer::planned(&job, topology, params, self.planned) {
            self.planned = job.at;
            job.moves = Arc::new(moves);
        }
        self.wave = None;
        self.waiting = None;
        self.notices.wave_completed();
        Tested::Complete(verdict, job)
    }

    /// Join a new wave with `status` if it is time (a busy rank only at
    /// its checks, every `interval`, unless `waiting` inside the library).
    pub(super) fn join(
        &mut self,
        comm: &Comm,
        rank: &Rank,
        status: Status,
        now: f64,
        interval: f64,
        waiting: bool,
    ) {
        let ends_soon = status.remaining as f64 <= rank.speed() * interval;
        let busy = status.busy && !waiting;
        if !crate::verdict::joins_wave(now, busy, ends_soon, self.next_wave, interval) {
            return;
        }
        self.next_wave = now + interval;
        let words = Words::of(&status, comm.rank(), rank.topology());
        self.wave = Some(comm.start_wave(words));
    }

    /// A wave waited for longer than `wait_warning`: say for whom, once, then
    /// with a doubling back-off. From half that wait this rank tells the
    /// ranks that print it that it waits, and again every half that wait
    /// ([`Notices`]); they print the ranks not heard from within the wait,
    /// busy or idle at the last wave. Every waiting rank logs it.
    pub(super) fn warn_stall(&mut self, ctx: &mut Context, now: f64) {
        let patience = ctx.config.wait_warning;
        let (since, at) = *self.waiting.get_or_insert((now, now + patience));
        self.notices.receive(&ctx.comm, now);
        let period = 0.5 * patience;
        if now >= since + period && self.notices.due(now, period) {
            let printers = self.printers(ctx.comm.size());
            self.notices.tell(&ctx.comm, &printers, now);
        }
        if now < at {
            return;
        }
        let printers = self.printers(ctx.comm.size());
        self.waiting = Some((since, now + (now - since)));
        let me = ctx.me();
        let waiting = self.notices.heard_since(now - patience);
        let silent: Vec<usize> = (0..ctx.comm.size())
            .filter(|&r| r != me && waiting.binary_search(&r).is_err())
            .collect();
        let shown: Vec<String> = silent.iter().take(8).map(|r| r.to_string()).collect();
        let waited = now - since;
        let text = match silent.len() {
            0 => format!(
                "waited {waited:.0} s for a check every rank has said lately it waits for \
                 (MPI progress)"
            ),
            n => {
                let who = match n {
                    n if n > 8 => format!("ranks {}, ... ({n} in all)", shown.join(", ")),
                    _ => format!("rank(s) {}", shown.join(", ")),
                };
                format!(
                    "waited {waited:.0} s for {who}, which have not said lately they wait, to call \
                     soslb_next or soslb_finalize (a realisation longer than that, or a rank \
                     that stopped calling)"
                )
            }
        };
        let first = printers[0];
        if me == first || (printers.contains(&me) && silent.contains(&first)) {
            crate::error::warn(me, &text);
        }
        ctx.monitor.line(now, format_args!("warning {text}"));
        ctx.monitor.flush();
        ctx.warnings.push(text);
    }

    /// The ranks that print a stall warning: first the lowest rank idle at
    /// the last wave (it waits), else rank 0; then the next idle rank, else
    /// the lowest other, which prints only while the first has not said it
    /// waits (the first may be the rank stopped).
    fn printers(&self, ranks: usize) -> Vec<usize> {
        // (The busy ranks are in rank order.)
        let busy = self.judge.busy();
        let mut idle = (0..ranks).filter(|r| busy.binary_search(r).is_err());
        let first = idle.next().unwrap_or(0);
        let second = idle.next().or_else(|| (0..ranks).find(|&r| r != first));
        std::iter::once(first).chain(second).collect()
    }

    /// Join Algorithm 1's collective with this rank's warm-up report and
    /// status; the rank computes its reserve until it completes.
    pub(super) fn start_exchange(&mut self, comm: &Comm, report: &WarmupReport, status: &Status) {
        let mut words = report.to_words().to_vec();
        words.push(status.flags());
        self.gather = Some(comm.start_gather(words));
    }

    /// Once the collective has completed (at once if `wait`, sleeping
    /// until then): every rank's warm-up report and status, judged. None
    /// while it is in flight, or when there is none.
    pub(super) fn end_exchange(
        &mut self,
        wait: bool,
        ranks: usize,
        topology: &Topology,
    ) -> Result<Option<Exchanged>> {
        let Some(mut gather) = self.gather.take() else {
            return Ok(None);
        };
        if !wait && gather.test().is_none() {
            self.gather = Some(gather);
            return Ok(None);
        }
        let all = gather.wait();
        self.exchanged = true;
        let mut reduced = Words::zero(ranks, topology.hosts());
        let mut reports = Vec::with_capacity(ranks);
        for (r, w) in all.chunks_exact(WarmupReport::WORDS + 1).enumerate() {
            let (words, flags) = w.split_at(WarmupReport::WORDS);
            let report = WarmupReport::from_words(
                words
                    .try_into()
                    .map_err(|_| Error::Internal("a warm-up report of the wrong length".into()))?,
            );
            let status = Status::from_flags(report.done, flags[0]);
            reduced.merge(&Words::of(&status, r, topology));
            reports.push(report);
        }
        let verdict = self.judge.judge(&reduced);
        Ok(Some(Exchanged { verdict, reports }))
    }

    /// Every rank has the verdict `v`: after a failure, the failed rank's
    /// code and message reach every rank; the monitor log says it. (The
    /// caller records the verdict.)
    pub(super) fn settle(&mut self, ctx: &mut Context, rank: &mut Rank, v: &Verdict) {
        if let Verdict::Failed { first, .. } = v {
            let (code, message) = self
                .failure
                .clone()
                .unwrap_or((code::INTERNAL, String::new()));
            let (code, message) = ctx.comm.broadcast_message(code, &message, *first);
            self.error = Some((*first, code, message));
        }
        let t = ctx.now();
        rank.flush_progress(t);
        ctx.log_events(rank, t);
        ctx.monitor.line(
            t,
            format_args!("verdict {v:?} computed={}", rank.audit().count),
        );
        // A failure is written at once, for a post-mortem; the end of a
        // good run with finalize's line, one write per rank.
        if matches!(v, Verdict::Failed { .. } | Verdict::Lost { .. }) {
            ctx.monitor.flush();
        }
    }
}
