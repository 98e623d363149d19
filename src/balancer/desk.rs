//! The clerk's desk: the rank's clerk ([`crate::clerk`]) and the file
//! board in a thread of their own, fed requests one by one.

use crate::board::Board;
use crate::board::file::FileBoard;
use crate::clerk::Clerk;
use crate::error::{Error, Result};
use crate::policy::{Outcome, Reply, Request};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender, TryRecvError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The rank's clerk and the file board in a thread of their own: the
/// thread touches files, never MPI (DESIGN §3). Requests go in one by one;
/// each reply comes back with the time the request took.
pub(super) struct Desk {
    requests: Option<Sender<Request>>,
    /// Set when the job's verdict is in ([`Clerk::verdict_flag`]).
    over: Arc<AtomicBool>,
    replies: Receiver<(Reply, u64)>,
    thread: Option<JoinHandle<()>>,
    /// Storage operations of the board so far (as of the last reply).
    ops: u64,
}

impl Desk {
    /// Start the clerk's thread with the rank's board and its host's.
    pub(super) fn start(
        mut clerk: Clerk,
        mut board: FileBoard,
        mut host: Option<FileBoard>,
    ) -> Result<Desk> {
        let over = clerk.verdict_flag();
        let (requests, inbox) = mpsc::channel::<Request>();
        let (outbox, replies) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("soslb-clerk".into())
            .spawn(move || {
                for request in inbox {
                    let t = Instant::now();
                    // A panic is an internal error of the rank, never a hang.
                    let served = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        let host = host.as_mut().map(|b| b as &mut dyn Board);
                        clerk.serve_on(request, &mut board, host)
                    }));
                    let mut reply = served.unwrap_or_else(|panic| Reply {
                        outcome: Outcome::Failed(Error::from_panic(
                            "the clerk's thread panicked: ",
                            &*panic,
                        )),
                        seconds: None,
                        ops: [0, 0],
                        looks: (0, 0),
                        errors: Vec::new(),
                    });
                    reply.seconds = Some(t.elapsed().as_secs_f64());
                    // Problems the boards got round themselves.
                    reply.errors.extend(board.take_notes());
                    if let Some(h) = &mut host {
                        reply.errors.extend(h.take_notes());
                    }
                    if outbox.send((reply, board.ops())).is_err() {
                        break;
                    }
                }
            })
            .map_err(|e| Error::Internal(format!("cannot start the clerk's thread: {e}")))?;
        Ok(Desk {
            requests: Some(requests),
            over,
            replies,
            thread: Some(thread),
            ops: 0,
        })
    }

    /// Hand the clerk a request.
    pub(super) fn send(&self, request: Request) -> Result<()> {
        self.requests
            .as_ref()
            .and_then(|r| r.send(request).ok())
            .ok_or_else(|| Error::Internal("the clerk's thread has ended".into()))
    }

    /// Tell the clerk that the job's verdict is in.
    pub(super) fn job_over(&self) {
        self.over.store(true, Ordering::Relaxed);
    }

    /// Storage operations of the board so far (as of the last reply).
    pub(super) fn ops(&self) -> u64 {
        self.ops
    }

    /// The reply, if it has come (waiting up to `wait`).
    pub(super) fn reply(&mut self, wait: Option<Duration>) -> Result<Option<Reply>> {
        let got = match wait {
            None => self
                .replies
                .try_recv()
                .map_err(|e| e == TryRecvError::Disconnected),
            Some(d) => self
                .replies
                .recv_timeout(d)
                .map_err(|e| e == RecvTimeoutError::Disconnected),
        };
        match got {
            Ok((reply, ops)) => {
                self.ops = ops;
                Ok(Some(reply))
            }
            Err(false) => Ok(None),
            Err(true) => Err(Error::Internal("the clerk's thread has ended".into())),
        }
    }

    /// Let the clerk finish the request out, end its thread (which closes
    /// the board's descriptors); the board's operations, and the reply not
    /// taken yet.
    pub(super) fn close(&mut self) -> (u64, Option<Reply>) {
        self.requests = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let mut last = None;
        while let Ok((reply, ops)) = self.replies.try_recv() {
            self.ops = ops;
            last = Some(reply);
        }
        (self.ops, last)
    }
}
