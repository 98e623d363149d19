//! The MPI shell: the library's duplicate of the caller's communicator and
//! the few collectives the library makes, all from the calling thread.
//!
//! Waits on other ranks sleep between `MPI_Test` calls instead of spinning in
//! a blocking call, so that waiting ranks leave the cores to working ones.
//! Every collective here is non-blocking underneath, `MPI_Comm_dup` too
//! (`MPI_Comm_idup`): MPICH's blocking calls poll without ever yielding, and
//! on an oversubscribed node (64 ranks on 2 cores) the ranks that reached a
//! collective first kept the late ones from the cores: init took seconds.

use crate::error::{Error, Result};
use crate::verdict::Words;
use mpi::ffi::MPI_Request;
use mpi::raw::AsRaw;
use mpi::request::Request;
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;
use std::mem::ManuallyDrop;
use std::time::Duration;

/// The library's own communicator.
pub struct Comm {
    comm: ManuallyDrop<SimpleCommunicator>,
    rank: usize,
    size: usize,
}

/// MPI must be initialised and not finalised for any call.
pub fn check_mpi() -> Result<()> {
    if !mpi::environment::is_initialized() {
        return Err(Error::Mpi(
            "MPI is not initialised: call MPI_Init before soslb_init".into(),
        ));
    }
    if mpi::environment::is_finalized() {
        return Err(Error::Mpi(
            "MPI is already finalised: call soslb_finalize before MPI_Finalize".into(),
        ));
    }
    Ok(())
}

/// The longest pause between tests of a collective that completes in rounds
/// (each advances only at a test): at 2 ms the first `MPI_Comm_idup` of 16
/// ranks on four hosts took 80 to 97 ms and the config's two allgathers 20
/// to 30 ms (5 and 3 ms blocking); at 0.2 ms 15 and 20 ms.
const ROUNDS: Duration = Duration::from_micros(200);

/// Sleep between tests of a request, from 20 µs doubling up to `cap`.
fn wait_quietly<'a, S: mpi::request::Scope<'a>>(mut req: Request<'a, (), S>, cap: Duration) {
    let mut pause = Duration::from_micros(20);
    loop {
        match req.test() {
            Ok(_) => return,
            Err(r) => req = r,
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(cap);
    }
}

/// Sleep between `MPI_Testall` calls on raw requests until all complete.
fn wait_raw(reqs: &mut [MPI_Request], cap: Duration) {
    let mut pause = Duration::from_micros(20);
    while !test_raw(reqs) {
        std::thread::sleep(pause);
        pause = (pause * 2).min(cap);
    }
}

/// `MPI_REQUEST_NULL`.
fn null_request() -> MPI_Request {
    // SAFETY: a plain handle value.
    unsafe { mpi::ffi::RSMPI_REQUEST_NULL }
}

/// The predefined `MPI_UINT64_T`.
fn u64_type() -> mpi::ffi::MPI_Datatype {
    // SAFETY: a plain handle value.
    unsafe { mpi::ffi::RSMPI_UINT64_T }
}

/// The predefined `MPI_UINT8_T`.
fn u8_type() -> mpi::ffi::MPI_Datatype {
    // SAFETY: a plain handle value.
    unsafe { mpi::ffi::RSMPI_UINT8_T }
}

/// `MPI_Comm_idup` of `comm`, waited for quietly: the duplicate.
///
/// # Safety
/// `comm` is a valid communicator and MPI is initialised.
unsafe fn idup(comm: mpi::ffi::MPI_Comm) -> mpi::ffi::MPI_Comm {
    let mut req = [null_request()];
    // SAFETY: the caller's contract.
    let mut dup = unsafe { mpi::ffi::RSMPI_COMM_NULL };
    // SAFETY: `dup` outlives the request, which is waited for here.
    unsafe { mpi::ffi::MPI_Comm_idup(comm, &mut dup, &mut req[0]) };
    wait_raw(&mut req, ROUNDS);
    dup
}

/// `MPI_Testall`: true when every request completed.
fn test_raw(reqs: &mut [MPI_Request]) -> bool {
    let mut flag = 0;
    // SAFETY: `reqs` are valid requests (or MPI_REQUEST_NULL); statuses ignored.
    unsafe {
        mpi::ffi::MPI_Testall(
            reqs.len() as i32,
            reqs.as_mut_ptr(),
            &mut flag,
            mpi::ffi::RSMPI_STATUSES_IGNORE,
        );
    }
    flag != 0
}

/// A termination wave in flight (DESIGN §5): a non-blocking `MPI_SUM` of
/// [`Words::sums`] and `MPI_BOR` of [`Words::bits`] over all ranks.
///
/// The buffers live on the heap, owned here, until the reductions complete;
/// a wave dropped unfinished leaks them, since MPI may still write there.
pub struct Wave {
    send: Box<Words>,
    recv: Box<Words>,
    reqs: [MPI_Request; 2],
    complete: bool,
}

impl Wave {
    /// The reduced words once every rank has joined, else `None`.
    pub fn test(&mut self) -> Option<&Words> {
        if !self.complete {
            self.complete = test_raw(&mut self.reqs);
        }
        self.complete.then_some(&*self.recv)
    }
}

impl Drop for Wave {
    fn drop(&mut self) {
        if !self.complete && !mpi::environment::is_finalized() {
            std::mem::forget(std::mem::replace(
                &mut self.send,
                Box::new(Words::zero(0, 0)),
            ));
            std::mem::forget(std::mem::replace(
                &mut self.recv,
                Box::new(Words::zero(0, 0)),
            ));
        }
    }
}

/// An `MPI_Iallgather` of `u64` words in flight (the warm-up exchange).
///
/// As with [`Wave`], the buffers are heap allocations owned here until the
/// gather completes; one dropped unfinished leaks them.
pub struct Gather {
    send: Vec<u64>,
    recv: Vec<u64>,
    reqs: [MPI_Request; 1],
    complete: bool,
}

impl Gather {
    /// Every rank's words, rank by rank, once every rank has joined.
    pub fn test(&mut self) -> Option<&[u64]> {
        if !self.complete {
            self.complete = test_raw(&mut self.reqs);
        }
        self.complete.then_some(&self.recv[..])
    }

    /// [`Gather::test`] until complete, sleeping between tests (up to [`ROUNDS`]).
    pub fn wait(&mut self) -> &[u64] {
        if !self.complete {
            wait_raw(&mut self.reqs, ROUNDS);
            self.complete = true;
        }
        &self.recv
    }
}

impl Drop for Gather {
    fn drop(&mut self) {
        if !self.complete && !mpi::environment::is_finalized() {
            std::mem::forget(std::mem::take(&mut self.send));
            std::mem::forget(std::mem::take(&mut self.recv));
        }
    }
}

/// The point-to-point messages of the library's communicator, by tag (its
/// collectives do not match them, and the ping-pongs of measured sites use
/// tag 0).
#[derive(Clone, Copy, Debug)]
pub enum Mail {
    /// A host transfer ([`crate::transfer`]): the ids' ranges.
    Transfer = 7,
    /// A waiting rank's notice to the ranks that warn of a stalled wave.
    Waiting = 8,
}

/// A message on its way: an `MPI_Issend`, which completes once the receiver
/// has matched it (a host transfer's ids are then the receiver's). The
/// buffer is owned here until then; one dropped unfinished leaks it, since
/// MPI may still read it.
struct Outgoing {
    words: Vec<u64>,
    req: [MPI_Request; 1],
    complete: bool,
}

impl Outgoing {
    /// True once the receiver has the message.
    fn test(&mut self) -> bool {
        if !self.complete {
            self.complete = test_raw(&mut self.req);
        }
        self.complete
    }
}

impl Drop for Outgoing {
    fn drop(&mut self) {
        if !self.complete && !mpi::environment::is_finalized() {
            std::mem::forget(std::mem::take(&mut self.words));
        }
    }
}

/// One kind of point-to-point message, as one rank sends and receives it:
/// the sends on their way, and the counts that let [`Mailbox::drain`]
/// leave none pending.
pub struct Mailbox {
    mail: Mail,
    outgoing: Vec<Outgoing>,
    sent: u64,
    received: u64,
}

impl Mailbox {
    /// An empty mailbox for `mail`.
    pub fn new(mail: Mail) -> Mailbox {
        Mailbox {
            mail,
            outgoing: Vec::new(),
            sent: 0,
            received: 0,
        }
    }

    /// Send `words` to rank `to`.
    pub fn send(&mut self, comm: &Comm, to: usize, words: Vec<u64>) {
        self.outgoing.push(comm.send(self.mail, to, words));
        self.sent += 1;
    }

    /// A message that has arrived, if there is one: (the sender, its words).
    pub fn receive(&mut self, comm: &Comm) -> Option<(usize, Vec<u64>)> {
        let got = comm.receive(self.mail);
        self.received += u64::from(got.is_some());
        got
    }

    /// Let go of the sends their receivers have.
    pub fn prune(&mut self) {
        self.outgoing.retain_mut(|o| !o.test());
    }

    /// Some sends were on their way at the last [`Mailbox::prune`].
    pub fn sending(&self) -> bool {
        !self.outgoing.is_empty()
    }

    /// At the end (collective over the ranks that use this kind): receive
    /// every message still on its way, then wait until this rank's sends
    /// are complete, so that none is left pending.
    pub fn drain(&mut self, comm: &Comm) {
        loop {
            while self.receive(comm).is_some() {}
            if comm.sum(&[self.sent as i64 - self.received as i64])[0] == 0 {
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        let mut pause = Duration::from_micros(20);
        while !self.outgoing.iter_mut().all(Outgoing::test) {
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(2));
        }
        self.outgoing.clear();
    }
}

/// Whether MPI takes `raw` for a communicator: its size asked with errors
/// returned, not fatal (an invalid handle's error goes to `MPI_COMM_WORLD`,
/// or to `MPI_COMM_SELF` since MPI 4), their handlers put back after.
///
/// # Safety
/// MPI must be initialised.
unsafe fn valid(raw: mpi::ffi::MPI_Comm) -> bool {
    use mpi::ffi::{MPI_Comm_get_errhandler, MPI_Comm_set_errhandler, MPI_Errhandler_free};
    // SAFETY: MPI is initialised; the handlers got are put back and freed.
    unsafe {
        let worlds = [mpi::ffi::RSMPI_COMM_WORLD, mpi::ffi::RSMPI_COMM_SELF];
        let kept = worlds.map(|c| {
            let mut h = std::mem::MaybeUninit::uninit();
            MPI_Comm_get_errhandler(c, h.as_mut_ptr());
            MPI_Comm_set_errhandler(c, mpi::ffi::RSMPI_ERRORS_RETURN);
            h.assume_init()
        });
        let mut size = 0;
        let ok = mpi::ffi::MPI_Comm_size(raw, &mut size) == mpi::ffi::MPI_SUCCESS as i32;
        for (c, mut h) in worlds.into_iter().zip(kept) {
            MPI_Comm_set_errhandler(c, h);
            MPI_Errhandler_free(&mut h);
        }
        ok
    }
}

impl Comm {
    /// Send `words` as `mail` to rank `to`: a synchronous-mode non-blocking
    /// send, complete once `to` has received it.
    fn send(&self, mail: Mail, to: usize, words: Vec<u64>) -> Outgoing {
        // SAFETY: MPI_REQUEST_NULL is a plain handle value.
        let mut req = [unsafe { mpi::ffi::RSMPI_REQUEST_NULL }];
        // SAFETY: the buffer is a heap allocation owned by the returned
        // Outgoing, which keeps it (or leaks it) until the request
        // completes; the datatype is a predefined handle.
        unsafe {
            mpi::ffi::MPI_Issend(
                words.as_ptr().cast(),
                words.len() as i32,
                mpi::ffi::RSMPI_UINT64_T,
                to as i32,
                mail as i32,
                self.comm.as_raw(),
                &mut req[0],
            );
        }
        Outgoing {
            words,
            req,
            complete: false,
        }
    }

    /// A message of `mail`'s kind that has arrived from any rank, if there
    /// is one: (the sender, its words).
    fn receive(&self, mail: Mail) -> Option<(usize, Vec<u64>)> {
        let comm = self.comm.as_raw();
        let mut flag = 0;
        // SAFETY: a status is plain data; MPI fills it in.
        let mut status: mpi::ffi::MPI_Status = unsafe { std::mem::zeroed() };
        // SAFETY: valid communicator and status; ANY_SOURCE is a constant.
        unsafe {
            mpi::ffi::MPI_Iprobe(
                mpi::ffi::RSMPI_ANY_SOURCE,
                mail as i32,
                comm,
                &mut flag,
                &mut status,
            );
        }
        if flag == 0 {
            return None;
        }
        let mut count = 0;
        // SAFETY: the status of the probed message; a predefined datatype.
        unsafe { mpi::ffi::MPI_Get_count(&status, mpi::ffi::RSMPI_UINT64_T, &mut count) };
        let from = status.MPI_SOURCE;
        let mut words = vec![0u64; count.max(0) as usize];
        // SAFETY: the buffer holds the probed message's `count` words; the
        // message from `from` with this tag is the one probed (MPI keeps
        // the order of messages between two ranks).
        unsafe {
            mpi::ffi::MPI_Recv(
                words.as_mut_ptr().cast(),
                count,
                mpi::ffi::RSMPI_UINT64_T,
                from,
                mail as i32,
                comm,
                mpi::ffi::RSMPI_STATUS_IGNORE,
            );
        }
        Some((from as usize, words))
    }

    /// Duplicate `comm` (`MPI_Comm_idup`, waited for quietly).
    pub fn duplicate<C: Communicator>(comm: &C) -> Comm {
        // SAFETY: a valid communicator of the caller's.
        Self::wrap(unsafe { SimpleCommunicator::from_raw(idup(comm.as_raw())) })
    }

    /// Duplicate the communicator of a Fortran handle.
    ///
    /// # Safety
    /// MPI must be initialised (see [`check_mpi`]).
    pub unsafe fn duplicate_fortran(handle: i32) -> Result<Comm> {
        // SAFETY: MPI is initialised; f2c of any integer is defined, and
        // `valid` asks MPI about the result with errors returned.
        unsafe {
            let raw = mpi::ffi::RSMPI_Comm_f2c(handle);
            if raw == mpi::ffi::RSMPI_COMM_NULL || !valid(raw) {
                return Err(Error::argument(
                    "comm",
                    format!("Fortran handle {handle} is MPI_COMM_NULL or not a communicator"),
                ));
            }
            Ok(Self::wrap(SimpleCommunicator::from_raw(idup(raw))))
        }
    }

    fn wrap(comm: SimpleCommunicator) -> Comm {
        Comm {
            rank: comm.rank() as usize,
            size: comm.size() as usize,
            comm: ManuallyDrop::new(comm),
        }
    }

    /// This rank.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// Number of ranks.
    pub fn size(&self) -> usize {
        self.size
    }

    /// A barrier during which waiting ranks sleep.
    pub fn quiet_barrier(&self) {
        wait_quietly(self.comm.immediate_barrier(), Duration::from_millis(2));
    }

    /// Join a new termination wave with this rank's `words` (the same
    /// length on every rank).
    pub fn start_wave(&self, words: Words) -> Wave {
        let send = Box::new(words);
        let mut recv = Box::new(Words::zero_like(&send));
        // SAFETY: MPI_REQUEST_NULL is a plain handle value.
        let null = unsafe { mpi::ffi::RSMPI_REQUEST_NULL };
        let mut reqs = [null; 2];
        let comm = self.comm.as_raw();
        let reduce = |from: &[u64], into: &mut [u64], op, req: &mut MPI_Request| {
            // SAFETY: the buffers are heap allocations owned by the returned
            // Wave, which keeps them (or leaks them) until the requests complete.
            unsafe {
                mpi::ffi::MPI_Iallreduce(
                    from.as_ptr().cast(),
                    into.as_mut_ptr().cast(),
                    from.len() as i32,
                    mpi::ffi::RSMPI_UINT64_T,
                    op,
                    comm,
                    req,
                );
            }
        };
        let [sum_req, bor_req] = &mut reqs;
        // SAFETY: the predefined operations are plain handle values.
        let (sum, bor) = unsafe { (mpi::ffi::RSMPI_SUM, mpi::ffi::RSMPI_BOR) };
        reduce(&send.sums, &mut recv.sums, sum, sum_req);
        reduce(&send.bits, &mut recv.bits, bor, bor_req);
        Wave {
            send,
            recv,
            reqs,
            complete: false,
        }
    }

    /// Rank `root`'s message (cut at 4 KiB) and a code, on every rank; the
    /// waiting ranks sleep.
    pub fn broadcast_message(&self, code: i32, message: &str, root: usize) -> (i32, String) {
        const MAX: usize = 4096;
        let mut buf = vec![0u8; MAX + 4];
        buf[..4].copy_from_slice(&code.to_le_bytes());
        let mut n = message.len().min(MAX);
        while !message.is_char_boundary(n) {
            n -= 1;
        }
        buf[4..4 + n].copy_from_slice(&message.as_bytes()[..n]);
        // SAFETY: MPI_REQUEST_NULL is a plain handle value.
        let mut req = [unsafe { mpi::ffi::RSMPI_REQUEST_NULL }];
        // SAFETY: `buf` outlives the request, which is waited for here.
        unsafe {
            mpi::ffi::MPI_Ibcast(
                buf.as_mut_ptr().cast(),
                buf.len() as i32,
                mpi::ffi::RSMPI_UINT8_T,
                root as i32,
                self.comm.as_raw(),
                &mut req[0],
            );
        }
        wait_raw(&mut req, Duration::from_millis(5));
        let code = i32::from_le_bytes([buf[0], buf[1], buf[2], buf[3]]);
        let end = buf[4..]
            .iter()
            .position(|&b| b == 0)
            .map_or(buf.len(), |p| p + 4);
        (code, String::from_utf8_lossy(&buf[4..end]).into_owned())
    }

    /// Every rank learns whether every rank succeeded. A rank that failed
    /// returns its own error; the others an error with the lowest failed
    /// rank's message.
    pub fn agree<T>(&self, local: Result<T>) -> Result<T> {
        let mine = [local.is_err() as u64];
        let flags = self.all_gather(&mine);
        let failed: Vec<usize> = (0..self.size).filter(|&r| flags[r] != 0).collect();
        let Some(&first) = failed.first() else {
            return local;
        };
        let text = local.as_ref().err().map(Error::to_string);
        let (_, message) = self.broadcast_message(0, text.as_deref().unwrap_or(""), first);
        let others = match failed.len() {
            1 => String::new(),
            _ => format!(" (ranks {failed:?} failed)"),
        };
        local.and_then(|_| {
            Err(Error::Mpi(format!(
                "rank {first} failed to start soslb{others}: {message}"
            )))
        })
    }

    /// `MPI_Allgather` of `words` (the same length on every rank), rank by
    /// rank; the waiting ranks sleep. (Nothing for no words, as in
    /// [`Comm::sum`]: an empty buffer's address may be Open MPI's
    /// `MPI_IN_PLACE`.)
    pub fn all_gather(&self, words: &[u64]) -> Vec<u64> {
        if words.is_empty() {
            return Vec::new();
        }
        let mut gather = self.start_gather(words.to_vec());
        gather.wait();
        std::mem::take(&mut gather.recv)
    }

    /// Start an `MPI_Iallgather` of `words` (the same length on every rank).
    pub fn start_gather(&self, words: Vec<u64>) -> Gather {
        let mut recv = vec![0u64; words.len() * self.size];
        // SAFETY: MPI_REQUEST_NULL is a plain handle value.
        let mut reqs = [unsafe { mpi::ffi::RSMPI_REQUEST_NULL }];
        // SAFETY: the buffers are heap allocations owned by the returned
        // Gather, which keeps them (or leaks them) until the request
        // completes; the datatype is a predefined handle.
        unsafe {
            mpi::ffi::MPI_Iallgather(
                words.as_ptr().cast(),
                words.len() as i32,
                mpi::ffi::RSMPI_UINT64_T,
                recv.as_mut_ptr().cast(),
                words.len() as i32,
                mpi::ffi::RSMPI_UINT64_T,
                self.comm.as_raw(),
                &mut reqs[0],
            );
        }
        Gather {
            send: words,
            recv,
            reqs,
            complete: false,
        }
    }

    /// Allgather of short strings (longer ones are cut at `max` bytes).
    pub fn all_gather_strings(&self, s: &str, max: usize) -> Vec<String> {
        let mut buf = vec![0u8; max];
        let n = s.len().min(max);
        buf[..n].copy_from_slice(&s.as_bytes()[..n]);
        let mut all = vec![0u8; max * self.size];
        let mut req = [null_request()];
        // SAFETY: both buffers outlive the request, which is waited for here.
        unsafe {
            mpi::ffi::MPI_Iallgather(
                buf.as_ptr().cast(),
                max as i32,
                mpi::ffi::RSMPI_UINT8_T,
                all.as_mut_ptr().cast(),
                max as i32,
                mpi::ffi::RSMPI_UINT8_T,
                self.comm.as_raw(),
                &mut req[0],
            );
        }
        wait_raw(&mut req, ROUNDS);
        all.chunks(max)
            .map(|c| {
                let end = c.iter().position(|&b| b == 0).unwrap_or(c.len());
                String::from_utf8_lossy(&c[..end]).into_owned()
            })
            .collect()
    }

    /// Rank `root`'s string, on every rank; the waiting ranks sleep.
    pub fn broadcast_string(&self, s: &str, root: usize) -> String {
        let mut len = [s.len() as u64];
        self.quiet_bcast(len.as_mut_ptr().cast(), 1, u64_type(), root);
        let mut buf = s.as_bytes().to_vec();
        buf.resize(len[0] as usize, 0);
        self.quiet_bcast(buf.as_mut_ptr().cast(), buf.len(), u8_type(), root);
        String::from_utf8_lossy(&buf).into_owned()
    }

    /// `MPI_Ibcast` of `count` items at `buf`, waited for quietly. Nothing
    /// for none: an empty buffer's address may be 1, Open MPI's
    /// `MPI_IN_PLACE`, which its `MPI_Ibcast` refuses.
    fn quiet_bcast(
        &self,
        buf: *mut std::ffi::c_void,
        count: usize,
        datatype: mpi::ffi::MPI_Datatype,
        root: usize,
    ) {
        if count == 0 {
            return;
        }
        let mut req = [null_request()];
        // SAFETY: `buf` holds `count` items of `datatype` and outlives the
        // request, which is waited for here.
        unsafe {
            mpi::ffi::MPI_Ibcast(
                buf,
                count as i32,
                datatype,
                root as i32,
                self.comm.as_raw(),
                &mut req[0],
            );
        }
        wait_raw(&mut req, ROUNDS);
    }

    /// Round-trip times of 1 KiB ping-pongs from this rank to every rank `r`
    /// with `partners[r]` (which must be symmetric over the ranks): 5 round
    /// trips, the first discarded, the mean of the others. Pairs meet in the
    /// rounds of a round-robin tournament, so every rank is busy with one
    /// partner at a time.
    pub fn ping_pong(&self, partners: &[bool]) -> Vec<(usize, f64)> {
        let n = self.size + self.size % 2;
        let mut buf = [0u8; 1024];
        let mut times = Vec::new();
        for round in 0..n - 1 {
            // Circle method: n-1 is fixed, the others rotate.
            let me = self.rank;
            let partner = if me == n - 1 {
                round
            } else if me == round {
                n - 1
            } else {
                (2 * round + n - 1 - me) % (n - 1)
            };
            if partner >= self.size
                || partner == me
                || !partners.get(partner).copied().unwrap_or(false)
            {
                continue;
            }
            let other = self.comm.process_at_rank(partner as i32);
            let mut total = 0.0;
            for k in 0..5 {
                let t = std::time::Instant::now();
                if me < partner {
                    other.send(&buf[..]);
                    other.receive_into(&mut buf[..]);
                } else {
                    other.receive_into(&mut buf[..]);
                    other.send(&buf[..]);
                }
                if k > 0 {
                    total += t.elapsed().as_secs_f64();
                }
            }
            times.push((partner, total / 4.0));
        }
        times
    }

    /// Elementwise sum over all ranks; the waiting ranks sleep.
    pub fn sum(&self, words: &[i64]) -> Vec<i64> {
        if words.is_empty() {
            return Vec::new();
        }
        let mut out = vec![0i64; words.len()];
        let mut req = [null_request()];
        // SAFETY: both buffers outlive the request, which is waited for
        // here; the datatype and operation are predefined handles.
        unsafe {
            mpi::ffi::MPI_Iallreduce(
                words.as_ptr().cast(),
                out.as_mut_ptr().cast(),
                words.len() as i32,
                mpi::ffi::RSMPI_INT64_T,
                mpi::ffi::RSMPI_SUM,
                self.comm.as_raw(),
                &mut req[0],
            );
        }
        wait_raw(&mut req, ROUNDS);
        out
    }
}

impl Drop for Comm {
    fn drop(&mut self) {
        // MPI_Comm_free after MPI_Finalize is an error: then leave it.
        if !mpi::environment::is_finalized() {
            // SAFETY: dropped once, here.
            unsafe { ManuallyDrop::drop(&mut self.comm) };
        }
    }
}
