//! [`Balancer`]: the MPI and file shell around the pure state machine
//! ([`crate::policy::Rank`]). It reads the clock, makes the collectives,
//! runs the termination waves ([`crate::verdict`]), runs the rank's clerk
//! ([`crate::clerk`]) with the file board in a thread of its own, and owns
//! the discovery of SOS files and the monitor log.
//!
//! `Balancer` orchestrates its parts, each in a file of its own: the
//! set-up (`setup`), the termination (`termination`), the clerk's desk
//! (`desk`), the grid job's duties (`duties`: deadline, completion
//! journal, progress), host transfers (`transfers`), the notices of
//! waiting that name a stalled rank (`notices`), the run's files (`files`)
//! and the [`Summary`] (`summary`); `context` holds what they share.

mod context;
mod desk;
mod duties;
mod files;
mod notices;
mod setup;
mod summary;
mod termination;
mod transfers;

pub use summary::Summary;

use crate::board::watch::Discovery;
use crate::comm::{Comm, check_mpi};
use crate::config::Config;
use crate::error::{Error, Result};
use crate::phases::Phases;
use crate::plan::WarmupReport;
use crate::policy::{Rank, RankReport, Step};
use crate::protocol::Level;
use crate::resume::Prior;
use crate::stats::Observables;
use crate::verdict::Verdict;
use context::Context;
use desk::Desk;
use duties::Duties;
use files::RunFiles;
use mpi::traits::Communicator;
use std::ops::Range;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;
use std::sync::mpsc::{Receiver, TryRecvError};
use std::time::Duration;
pub(crate) use termination::BUSY_TEST_INTERVAL;
use termination::{TEST_INTERVAL, Termination, Tested};
use transfers::Transfers;

/// Balances `total` realisations over the ranks of a communicator.
///
/// Every rank calls [`Balancer::next`] in a loop and computes the ids it
/// returns, then [`Balancer::finish`] (collective). See the crate
/// documentation for an example.
///
/// The job ends with one verdict on every rank (DESIGN §5): all ids
/// computed, a stop asked by any rank ([`Balancer::stop`]), or a failure on
/// any rank, which every rank's `next` and `finish` then return as
/// [`Error::Rank`]. No rank is left waiting.
pub struct Balancer {
    /// The communicator, the clock, the settings, the log and warnings.
    ctx: Context,
    rank: Rank,
    /// The rank's clerk and the file board, in their thread.
    desk: Desk,
    files: RunFiles,
    discovery: Option<Discovery>,
    /// The deadline, the completion journal, the progress line.
    duties: Duties,
    end: Termination,
    transfers: Transfers,
    /// The emulated slowness of this rank.
    #[cfg(feature = "emulate")]
    stretch: crate::emulate::Stretch,
    observables: Observables,
    /// Realisations `next` has handed out in this run: `add` is called at
    /// most once for each.
    handed_out: u64,
    /// The storage cost, timed in the background at init
    /// ([`crate::board::file::FileBoard::probe_storage`]), until it arrives.
    storage_probe: Option<Receiver<f64>>,
    /// Seconds this rank spent in `init`.
    init_seconds: f64,
}

/// What one look for work found.
enum Look {
    /// Ids to compute.
    Ids(Range<u64>),
    /// The job's verdict is in.
    Verdict,
    /// Nothing yet: look again.
    Again,
    /// A request went to the clerk: look again at once, at the same time.
    Asked,
}

impl Balancer {
    /// Start balancing `total` realisations over the ranks of `comm`
    /// (collective; the communicator is duplicated).
    pub fn new<C: Communicator>(comm: &C, total: u64, config: Config) -> Result<Balancer> {
        check_mpi()?;
        let phases = Phases::start();
        Self::start(Comm::duplicate(comm), total, Ok(config), phases)
    }

    /// The C and Fortran entry: a Fortran communicator handle, a signed
    /// total, a config path (else the defaults of [`Config::load`]).
    pub fn from_fortran(comm: i32, total: i64, config: Option<&Path>) -> Result<Balancer> {
        check_mpi()?;
        let phases = Phases::start();
        // SAFETY: MPI is initialised.
        let comm = unsafe { Comm::duplicate_fortran(comm)? };
        let total_ok = u64::try_from(total).ok().filter(|&t| t > 0).ok_or_else(|| {
            Error::argument(
                "total",
                format!("{total}: the number of realisations must be at least 1"),
            )
        });
        let loaded = total_ok.and_then(|_| Config::load(config));
        Self::start(comm, total.max(0) as u64, loaded, phases)
    }

    fn start(comm: Comm, total: u64, config: Result<Config>, phases: Phases) -> Result<Balancer> {
        let s = setup::start(comm, total, config, phases)?;
        Ok(Balancer {
            ctx: s.ctx,
            rank: s.rank,
            desk: s.desk,
            files: s.files,
            discovery: s.discovery,
            duties: s.duties,
            end: s.end,
            transfers: Transfers::new(),
            #[cfg(feature = "emulate")]
            stretch: s.stretch,
            observables: Observables::new(),
            handed_out: 0,
            storage_probe: s.storage_probe,
            init_seconds: s.init_seconds,
        })
    }

    /// The storage cost timed at init, once it has arrived: one read, one
    /// operation.
    fn take_storage_probe(&mut self) {
        let Some(probe) = &self.storage_probe else {
            return;
        };
        match probe.try_recv() {
            Ok(seconds) => self.rank.observe_storage(seconds),
            Err(TryRecvError::Empty) => return,
            Err(TryRecvError::Disconnected) => {}
        }
        self.storage_probe = None;
    }

    /// Seconds since the common start.
    #[inline]
    fn now(&self) -> f64 {
        self.ctx.now()
    }

    /// The next chunk of ids to compute, or `None` when the job is over
    /// (every id computed, or a rank asked to stop).
    ///
    /// The time between two calls is the chunk's computing time. A rank
    /// without work waits here (sleeping, never spinning) while it helps
    /// others, until the job's verdict. An error on any rank is returned on
    /// every rank as [`Error::Rank`], and again by later calls.
    #[allow(clippy::should_implement_trait)] // fallible and blocking: not an Iterator
    pub fn next(&mut self) -> Result<Option<Range<u64>>> {
        // A panic in the library is this rank's failure, which every rank
        // reports, not a hang of the others.
        let ids = match catch_unwind(AssertUnwindSafe(|| self.next_ids())) {
            Ok(ids) => ids?,
            Err(panic) => {
                let e = Error::from_panic("soslb_next panicked: ", &*panic);
                return self.fail_and_conclude(e);
            }
        };
        if let Some(r) = &ids {
            self.handed_out += r.end - r.start;
        }
        Ok(ids)
    }

    /// The next ids to compute, or `None` at the end (see [`Balancer::next`]).
    fn next_ids(&mut self) -> Result<Option<Range<u64>>> {
        self.duties.completed();
        if self.end.verdict.is_some() {
            return self.outcome();
        }
        if self.end.stop || self.end.failure.is_some() {
            self.finish_chunk(self.now());
            self.conclude();
            return self.outcome();
        }
        if let Some(piece) = self.duties.pending() {
            return Ok(Some(piece));
        }
        #[cfg(feature = "emulate")]
        self.stretch.sleep();
        let now = self.now();
        #[cfg(feature = "emulate")]
        if (self.ctx.config.emulate.panic_at).is_some_and(|(r, t)| r == self.rank() && now >= t) {
            panic!("the emulated panic (emulate.panic_at)");
        }
        // The journal's write is not computing time: the chunk handed out
        // next starts after it.
        let journalled = self.duties.is_due(now);
        if journalled && self.on_due(now) {
            self.finish_chunk(now);
            self.conclude();
            return self.outcome();
        }
        // The chunk handed out starts after the library's own time.
        self.find_work(now, journalled)
    }

    /// The chunk handed out last is computed at `now`, and nothing more is
    /// handed out (the job stops): it counts, unless the journal still had
    /// pieces of it to hand out.
    fn finish_chunk(&mut self, now: f64) {
        if self.duties.chunk_whole() {
            self.rank.finish_chunk(now);
        }
    }

    /// Steps of the state machine from `now` until there are ids to
    /// compute or a verdict; `restart`: the chunk handed out starts when
    /// it is (after the library's own time).
    fn find_work(&mut self, mut now: f64, mut restart: bool) -> Result<Option<Range<u64>>> {
        loop {
            match self.look(now, &mut restart) {
                Ok(Look::Ids(ids)) => return Ok(Some(ids)),
                Ok(Look::Verdict) => return self.outcome(),
                Ok(Look::Asked) => continue,
                Ok(Look::Again) => {}
                Err(e) => return self.fail_and_conclude(e),
            }
            now = self.now();
        }
    }

    /// One step of the state machine at `now`, after the warm-up exchange
    /// and the clerk's reply if they have come.
    fn look(&mut self, now: f64, restart: &mut bool) -> Result<Look> {
        if self.end.gather.is_some() {
            self.end_exchange(false)?;
            if self.end.verdict.is_some() {
                return Ok(Look::Verdict);
            }
        }
        if self.rank.asking() {
            self.take_reply(None)?;
        }
        let step = self.rank.next(now);
        if self.rank.has_events() {
            self.log_events(now);
            *restart = true;
        }
        self.carry_out(step?, now, restart)
    }

    /// Carry out the state machine's `step` at `now`.
    fn carry_out(&mut self, step: Step, now: f64, restart: &mut bool) -> Result<Look> {
        let verdict_or_again = |over: bool| if over { Look::Verdict } else { Look::Again };
        match step {
            Step::Compute(ids) => Ok(self.hand_out(ids, now, *restart)),
            Step::Ask(request) => {
                self.desk.send(*request)?;
                Ok(Look::Asked)
            }
            Step::AwaitReply => {
                *restart = true;
                Ok(verdict_or_again(self.await_reply()?))
            }
            Step::Send { to, ids } => {
                self.transfers.send(&self.ctx.comm, to, &ids);
                Ok(Look::Again)
            }
            Step::Exchange(report) => {
                self.start_exchange(&report);
                Ok(Look::Again)
            }
            Step::AwaitPlan => {
                *restart = true;
                self.end_exchange(true)?;
                Ok(verdict_or_again(self.end.verdict.is_some()))
            }
            Step::Idle { until } => {
                *restart = true;
                // The ids finished since the last check, logged when
                // they were (the rank may wait long for the verdict).
                self.rank.flush_progress(now);
                if self.rank.has_events() {
                    self.log_events(now);
                }
                Ok(verdict_or_again(self.wait_idle(until)))
            }
        }
    }

    /// Hand out `ids` found at `now` (the chunk's time starting now when
    /// `restart`), after a test of the wave if one is due.
    fn hand_out(&mut self, ids: Range<u64>, now: f64, restart: bool) -> Look {
        // Only computing counts in the speed, never the library's own time.
        if restart {
            self.rank.restart_chunk(self.now());
        }
        if now >= self.end.next_test && self.wave_tick(now, false) {
            return Look::Verdict;
        }
        #[cfg(feature = "emulate")]
        self.stretch.start();
        Look::Ids(self.duties.hand_out(ids))
    }

    /// The clerk's reply, if it has come (waiting up to `wait` for it):
    /// the state machine applies it.
    fn take_reply(&mut self, wait: Option<Duration>) -> Result<bool> {
        let Some(reply) = self.desk.reply(wait)? else {
            return Ok(false);
        };
        self.rank.reply(reply)?;
        Ok(true)
    }

    /// No work until the clerk's reply comes: wait for it while taking
    /// part in the termination waves. True once there is a verdict.
    fn await_reply(&mut self) -> Result<bool> {
        let mut test_every = TEST_INTERVAL.0;
        loop {
            if self.wave_tick(self.now(), true) {
                return Ok(true);
            }
            if self.take_reply(Some(Duration::from_secs_f64(test_every)))?
                || self.transfers.take_arrived()
            {
                return Ok(false);
            }
            test_every = (2.0 * test_every).min(self.test_cap());
        }
    }

    /// The longest pause between two tests of the wave
    /// ([`Termination::test_cap`]).
    fn test_cap(&mut self) -> f64 {
        let (now, interval) = (self.now(), self.ctx.config.check_interval);
        self.end.test_cap(now, interval, self.rank.job_end())
    }

    /// Ask every rank to end the loop early (for example when the standard
    /// error is small enough): every rank's [`Balancer::next`] reports the
    /// end soon (this rank's at its next call), and the statistics cover
    /// exactly the realisations added.
    pub fn stop(&mut self) {
        if !self.end.stop {
            let t = self.now();
            self.ctx.monitor.line(t, format_args!("stop asked"));
        }
        self.end.stop = true;
    }

    /// The deadline's stop or the journal's write is due at `now`. True when
    /// this rank stops for the deadline.
    #[cold]
    fn on_due(&mut self, now: f64) -> bool {
        let stops = self
            .duties
            .on_due(&mut self.ctx, &self.observables, now, self.end.stop);
        if stops {
            self.stop();
        }
        stops
    }

    /// What `next` returns once there is a verdict.
    fn outcome(&self) -> Result<Option<Range<u64>>> {
        self.end.outcome(&self.files.job_dir, self.rank.total())
    }

    /// This rank failed with `e`: tell every rank, wait for the verdict.
    fn fail_and_conclude(&mut self, e: Error) -> Result<Option<Range<u64>>> {
        self.end.fail(&mut self.ctx, &e);
        self.conclude();
        self.outcome()
    }

    /// Take part in the termination until there is a verdict: the warm-up
    /// exchange if it is still ahead, then waves.
    fn conclude(&mut self) {
        if !self.end.exchanged {
            if self.end.gather.is_none() {
                let report = self.rank.warmup_report(self.now());
                self.start_exchange(&report);
            }
            if let Err(e) = self.end_exchange(true) {
                self.end.fail(&mut self.ctx, &e);
            }
        }
        let mut pause = TEST_INTERVAL.0;
        while !self.wave_tick(self.now(), true) {
            std::thread::sleep(Duration::from_secs_f64(pause));
            pause = (2.0 * pause).min(self.test_cap());
        }
    }

    /// Test the wave in flight; join a new one when none is in flight (a
    /// busy rank only at its checks, unless `waiting` inside the library).
    /// True once there is a verdict.
    fn wave_tick(&mut self, now: f64, waiting: bool) -> bool {
        if self.end.verdict.is_some() {
            return true;
        }
        if !self.end.exchanged {
            return false;
        }
        self.end.next_test = now + BUSY_TEST_INTERVAL;
        self.take_storage_probe();
        for e in self.transfers.take(&self.ctx.comm, &mut self.rank, now) {
            self.end.fail(&mut self.ctx, &e);
        }
        match self.end.test_wave(&self.rank) {
            Tested::Idle => {}
            Tested::Pending => {
                self.end.warn_stall(&mut self.ctx, now);
                return false;
            }
            Tested::Complete(verdict, job) => {
                let figures = (job.completed, job.open);
                self.rank.observe_job(job);
                let over = verdict.is_some();
                self.duties
                    .after_wave(&mut self.ctx, &self.rank, now, figures, over);
                if let Some(v) = verdict {
                    self.conclude_with(v);
                    return true;
                }
            }
        }
        let status = self.end.status(&self.rank, self.transfers.sending(), now);
        let interval = self.ctx.config.check_interval;
        self.end
            .join(&self.ctx.comm, &self.rank, status, now, interval, waiting);
        false
    }

    /// Every rank has the verdict `v`. Ids lost: an own slot lost to a
    /// claim that is still none names the file (collective).
    fn conclude_with(&mut self, v: Verdict) {
        if let Verdict::Lost { .. } = v {
            let found = self.files.unclaimed(self.ctx.me(), self.rank.unread());
            self.end.lost_in = self.named(found);
        }
        self.end.settle(&mut self.ctx, &mut self.rank, &v);
        self.desk.job_over();
        self.end.verdict = Some(v);
    }

    /// Write the state machine's events to the monitor log.
    #[cold]
    fn log_events(&mut self, now: f64) {
        self.ctx.log_events(&mut self.rank, now);
    }

    /// Join Algorithm 1's collective with this rank's warm-up report and
    /// status; the rank computes its reserve until it completes.
    fn start_exchange(&mut self, report: &WarmupReport) {
        let status = self
            .end
            .status(&self.rank, self.transfers.sending(), self.now());
        self.end.start_exchange(&self.ctx.comm, report, &status);
    }

    /// Once the collective has completed (at once if `wait`, sleeping
    /// until then): every rank's warm-up report and status. A failed or
    /// stopping rank makes it a verdict; else the plan applies.
    fn end_exchange(&mut self, wait: bool) -> Result<()> {
        let ranks = self.ctx.comm.size();
        let Some(done) = self.end.end_exchange(wait, ranks, self.rank.topology())? else {
            return Ok(());
        };
        if let Some(v) = done.verdict {
            self.conclude_with(v);
            return Ok(());
        }
        // Before the first decision that depends on it, if it is there.
        self.take_storage_probe();
        let now = self.now();
        self.rank.apply_plan(&done.reports, now)?;
        let horizon = self.rank.horizon();
        self.duties
            .after_plan(&mut self.ctx, &self.rank, now, horizon);
        Ok(())
    }

    /// Idle until `until`, waking early when the open index changes, while
    /// taking part in the termination waves. True once there is a verdict.
    fn wait_idle(&mut self, until: f64) -> bool {
        let mut test_every = TEST_INTERVAL.0;
        loop {
            let now = self.now();
            if self.wave_tick(now, true) {
                return true;
            }
            if now >= until || self.transfers.take_arrived() {
                return false;
            }
            let pause = Duration::from_secs_f64((until - now).min(test_every));
            test_every = (2.0 * test_every).min(self.test_cap());
            let woken = match &mut self.discovery {
                Some(d) => d.wait(pause),
                None => {
                    std::thread::sleep(pause);
                    false
                }
            };
            if woken {
                self.rank.index_changed();
                return false;
            }
        }
    }

    /// Add the observables of one realisation to the final statistics
    /// (every call, on every rank, passes the same number of values). A
    /// call for more realisations than `next` handed out is an error on
    /// every rank: the statistics would count some realisations twice.
    pub fn add(&mut self, values: &[f64]) -> Result<()> {
        if self.observables.count() >= self.handed_out {
            let e = Error::State(format!(
                "soslb_add was called for more realisations than soslb_next handed out to this \
                 rank ({}): call it once per realisation, with all its observables",
                self.handed_out
            ));
            self.end.fail(&mut self.ctx, &e);
            return Err(e);
        }
        if self.observables.is_empty() {
            self.duties.check_observables(values.len())?;
        }
        self.observables.add(values)
    }

    /// This rank's figures so far.
    pub fn report(&self) -> RankReport {
        self.rank.report()
    }

    /// This rank.
    pub fn rank(&self) -> usize {
        self.ctx.me()
    }

    /// The run directory on the signal directory (logs, SOS files).
    pub fn job_dir(&self) -> &Path {
        &self.files.job_dir
    }

    /// File operations on the signal directory so far: signal files and
    /// monitor-log writes.
    pub fn file_ops(&self) -> u64 {
        self.desk.ops() + self.ctx.monitor.writes()
    }

    /// True while this rank's SOS is open.
    pub fn sos_open(&self) -> bool {
        self.rank.sos_open()
    }

    /// The settings in use.
    pub fn config(&self) -> &Config {
        &self.ctx.config
    }

    /// Signal-file problems this rank recovered from so far.
    pub fn warnings(&self) -> &[String] {
        &self.ctx.warnings
    }

    /// End the run (collective): wait for the verdict, reduce the statistics,
    /// gather the ranks' figures, audit the ids computed, remove the signal
    /// files (unless `keep`), free the communicator.
    ///
    /// Calling it while this rank still owns ids (before [`Balancer::next`]
    /// returned `None`, and without [`Balancer::stop`]) is a failure of this
    /// rank that every rank reports. After a failure verdict the error is
    /// returned again here, on every rank. Observable counts that differ
    /// between ranks, and an audit that finds ids computed twice or not at
    /// all, are errors on every rank too.
    pub fn finish(mut self) -> Result<Summary> {
        let board_ops = self.wind_down();
        let elapsed = self.now();
        self.duties
            .finish(&mut self.ctx, &self.observables, elapsed);
        let (summary, mismatch) = self.summarise(elapsed)?;
        let result = self.judge_run(summary, mismatch, board_ops, elapsed);
        // The same decision on every rank: every term above is.
        let clean = result.is_ok() && !self.ctx.config.keep;
        self.clean_up(clean);
        result
    }

    /// The end of this rank's work at `finish`: the verdict, the last look
    /// at its SOS, the host transfers and notices of waiting drained, the
    /// clerk's thread ended.
    /// The board's operations.
    fn wind_down(&mut self) -> u64 {
        if self.end.verdict.is_none() {
            self.leave();
        }
        if self.end.verdict == Some(Verdict::Done)
            && let Err(e) = self.last_look()
        {
            self.ctx
                .warn_at_finish(format!("the last look at the own SOS failed: {e}"));
        }
        self.transfers.drain(&self.ctx.comm, self.rank.trades());
        self.end.notices.drain(&self.ctx.comm);
        if self.rank.has_events() {
            self.log_events(self.now());
        }
        // The request out (if any) is carried out, then the clerk's thread
        // ends and the board's descriptors close. Its reply still counts
        // (an owner's last look sees the last AID records).
        let (board_ops, last) = self.desk.close();
        if let Some(reply) = last.filter(|_| self.rank.asking())
            && let Err(e) = self.rank.reply(reply)
        {
            let text = format!("the last request to the signal files failed: {e}");
            self.ctx.warn_at_finish(text);
        }
        board_ops
    }

    /// Every rank's figures, the statistics and the ids computed, `elapsed`
    /// after the start (collective); an error when the ranks added
    /// different numbers of observables per realisation.
    fn summarise(&self, elapsed: f64) -> Result<(Summary, Option<Error>)> {
        let prior = self.duties.prior();
        let (comm, rank) = (&self.ctx.comm, &self.rank);
        let g = summary::gather(comm, rank, &self.observables, self.init_seconds, prior)?;
        let summary = Summary {
            count: g.observables.count(),
            statistics: g.observables.statistics(),
            hosts: (0..comm.size())
                .map(|r| rank.topology().host(r).to_string())
                .collect(),
            ranks: g.ranks,
            job_dir: self.files.job_dir.clone(),
            elapsed,
            verdict: self.end.verdict.clone().unwrap_or(Verdict::Done),
            audit: g.audit,
            resumed: prior.map_or(0, Prior::count),
            waves: self.end.waves,
            init: g.init,
        };
        Ok((summary, g.mismatch))
    }

    /// The run's result (the same on every rank): the verdict's error, else
    /// the ranks' `mismatch`, else ids computed twice or never; the monitor
    /// log's last line and the summary table.
    fn judge_run(
        &mut self,
        summary: Summary,
        mismatch: Option<Error>,
        board_ops: u64,
        elapsed: f64,
    ) -> Result<Summary> {
        let total = self.rank.total();
        let audit_error = summary.audit_problem(total);
        // Ids computed twice: a won claim file that is gone, names another
        // rank, or was won twice was removed during the run (every rank
        // decides alike, the audit being the same on every rank).
        let twice = match (&audit_error, &self.end.verdict) {
            (Some(_), Some(Verdict::Done)) => {
                let found = self.files.removed_claim(self.ctx.me(), self.rank.won());
                self.named(found).map(Error::Audit)
            }
            _ => None,
        };
        self.ctx.monitor.line(
            elapsed,
            format_args!(
                "finalize file_ops={} audit={}",
                board_ops,
                audit_error.as_deref().unwrap_or("ok")
            ),
        );
        self.ctx.monitor.flush();
        if self.ctx.config.summary && self.ctx.me() == 0 {
            print!("{}", summary.table(&self.ctx.config, total));
        }
        match (self.outcome(), mismatch, twice, audit_error) {
            (Err(e), ..) => Err(e),
            (_, Some(e), ..) => Err(e),
            (_, _, Some(e), _) => Err(e),
            (_, _, _, Some(a)) => Err(Error::Audit(a)),
            _ => Ok(summary),
        }
    }

    /// Remove the run's files: this rank's own signal files after a
    /// `clean` run, then, every descriptor closed, the run directory and
    /// the host's (collective unless the config keeps the files).
    fn clean_up(self, clean: bool) {
        // (Every rank's clerk has closed its descriptors: the gather above.)
        let claims: Vec<String> = (self.rank.won().iter())
            .filter(|w| w.0 == Level::Shared)
            .map(|(_, owner, s)| s.claim_name(*owner))
            .collect();
        if clean {
            self.files.remove_own(self.ctx.me(), &claims);
        }
        let Balancer {
            ctx,
            files,
            discovery,
            ..
        } = self;
        let Context {
            comm,
            config,
            monitor,
            ..
        } = ctx;
        // Close every descriptor (and the watcher) before the files go.
        drop((discovery, monitor));
        files.remove(&comm, &config, clean);
    }

    /// Every id is computed: an owner with slots still pending claims them
    /// (after the reply to a request out), so that the claims helpers made
    /// since its last refresh count in what it gave (the summary's and the
    /// report's `given`).
    fn last_look(&mut self) -> Result<()> {
        let wait = Some(Duration::from_secs_f64(TEST_INTERVAL.1));
        while self.rank.asking() {
            self.take_reply(wait)?;
        }
        if let Some(request) = self.rank.last_look(self.now()) {
            self.desk.send(request)?;
            while self.rank.asking() {
                self.take_reply(wait)?;
            }
        }
        Ok(())
    }

    /// The first of the ranks' `found` (collective): what the lowest rank
    /// that found something names, on every rank.
    fn named(&self, found: Option<String>) -> Option<String> {
        let comm = &self.ctx.comm;
        let flags = comm.all_gather(&[u64::from(found.is_some())]);
        let root = rows_first(&flags, 1, 0)?;
        let (_, text) = comm.broadcast_message(0, found.as_deref().unwrap_or(""), root);
        Some(text)
    }

    /// `finish` before the verdict: a rank that still owns ids fails (unless
    /// it asked to stop), then takes part in the termination.
    fn leave(&mut self) {
        let owned = self.rank.owned();
        if !self.end.stop
            && self.end.failure.is_none()
            && (!owned.is_empty() || self.rank.sos_open())
        {
            let when = if self.end.exchanged {
                ""
            } else {
                " during the warm-up"
            };
            let e = Error::State(format!(
                "soslb_finalize was called{when} while this rank still owned {} realisations \
                 (ids {owned}); call soslb_next until it reports the end, or soslb_stop to end early",
                owned.len()
            ));
            self.end.fail(&mut self.ctx, &e);
        }
        self.conclude();
    }
}

/// The lowest rank whose word `k` (of `n` words per rank in `all`) is set.
fn rows_first(all: &[u64], n: usize, k: usize) -> Option<usize> {
    all.chunks_exact(n).position(|w| w[k] != 0)
}
