//! Waking idle helpers without spinning (DESIGN §6, discovery).
//!
//! On a local file system a native watcher (inotify) on `open.ron` wakes a
//! waiting helper as soon as the index is rewritten. On a shared file system
//! ([`super::file::is_shared_fs`]) inotify only sees this host's writes, so
//! helpers poll: [`Discovery::wait`] then just sleeps, and the caller reads
//! the index after each wait.

use notify::{Event, EventKind, RecommendedWatcher, RecursiveMode, Watcher};
use std::path::Path;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::thread;
use std::time::{Duration, Instant};

/// Waits for a change of `open.ron`, by notification or by polling.
///
/// The watcher's thread only reads inotify events; it never calls MPI.
#[derive(Debug)]
pub struct Discovery {
    /// The watcher (dropping it stops its thread) and its events.
    watch: Option<(RecommendedWatcher, Receiver<notify::Result<Event>>)>,
    fallback: Option<String>,
}

impl Discovery {
    /// Watch the index file `open_index_path` if `watch` is true, else poll.
    ///
    /// If the watcher cannot be set up, polls and remembers why
    /// ([`Discovery::fallback_reason`]).
    pub fn new(open_index_path: &Path, watch: bool) -> Discovery {
        if !watch {
            return Discovery {
                watch: None,
                fallback: None,
            };
        }
        let (tx, rx) = mpsc::channel();
        let watcher = notify::recommended_watcher(tx).and_then(|mut w| {
            w.watch(open_index_path, RecursiveMode::NonRecursive)
                .map(|()| w)
        });
        match watcher {
            Ok(w) => Discovery {
                watch: Some((w, rx)),
                fallback: None,
            },
            Err(e) => Discovery {
                watch: None,
                fallback: Some(format!(
                    "cannot watch {}: {e}; polling it instead",
                    open_index_path.display()
                )),
            },
        }
    }

    /// True when a native watcher is active (false: polling).
    pub fn is_watching(&self) -> bool {
        self.watch.is_some()
    }

    /// Why watching was asked for but polling is used, if so.
    pub fn fallback_reason(&self) -> Option<&str> {
        self.fallback.as_deref()
    }

    /// Block until the index changes or `timeout` passes; true if a change
    /// was notified. Pending notifications are drained. When polling, sleeps
    /// `timeout` and answers false. Uses no CPU while it waits.
    pub fn wait(&mut self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let Some((_, rx)) = &self.watch else {
            thread::sleep(timeout);
            return false;
        };
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left) {
                Ok(event) if !wakes(&event) => continue,
                Ok(_) => {
                    while rx.try_recv().is_ok() {}
                    return true;
                }
                Err(RecvTimeoutError::Timeout) => return false,
                Err(RecvTimeoutError::Disconnected) => {
                    self.watch = None;
                    self.fallback = Some("the file watcher stopped; polling instead".into());
                    thread::sleep(deadline.saturating_duration_since(Instant::now()));
                    return false;
                }
            }
        }
    }
}

/// Whether an event may mean the index changed. Opens, reads and closes do
/// not: every helper's poll opens the file, and closing a descriptor open
/// for writing is reported as a close after writing even when nothing was
/// written (the first rank to finish dropped its board, whose descriptor
/// of the index is open for writing to take its lock, and woke every idle
/// rank: at 0.2 s per operation each then read the index, 0.4 s, before
/// the verdict reached it); a write is reported as a modification.
/// Watcher errors (a lost event queue) wake, to be safe.
fn wakes(event: &notify::Result<Event>) -> bool {
    match event {
        Ok(e) => !matches!(e.kind, EventKind::Access(_)),
        Err(_) => true,
    }
}
