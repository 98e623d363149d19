//! Waking idle helpers without spinning (DESIGN §6, discovery).
//!
//! On a local file system a native watcher (inotify) on the directory of
//! `open.ron` wakes a waiting helper as soon as the index is replaced (its
//! writers rename a new body over it, so the file itself cannot be watched). On a shared file system
//! ([`super::fs::is_shared_fs`]) inotify only sees this host's writes, so
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
    /// The index's path, as the watcher's events name it.
    index: std::path::PathBuf,
}

impl Discovery {
    /// Watch the index file `open_index_path` if `watch` is true, else poll.
    ///
    /// If the watcher cannot be set up, polls and remembers why
    /// ([`Discovery::fallback_reason`]).
    pub fn new(open_index_path: &Path, watch: bool) -> Discovery {
        let index = open_index_path.to_path_buf();
        if !watch {
            return Discovery {
                watch: None,
                fallback: None,
                index,
            };
        }
        let (tx, rx) = mpsc::channel();
        let dir = open_index_path.parent().unwrap_or(Path::new("."));
        let watcher = notify::recommended_watcher(tx)
            .and_then(|mut w| w.watch(dir, RecursiveMode::NonRecursive).map(|()| w));
        match watcher {
            Ok(w) => Discovery {
                watch: Some((w, rx)),
                fallback: None,
                index,
            },
            Err(e) => Discovery {
                watch: None,
                index,
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
                Ok(event) if !wakes(&event, &self.index) => continue,
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

/// Whether an event may mean the index changed: a change to `index` (a
/// new body renamed over it) other than an access (every helper's poll
/// opens and reads it). Watcher errors (a lost event queue) wake, to be
/// safe.
fn wakes(event: &notify::Result<Event>, index: &Path) -> bool {
    match event {
        Ok(e) => {
            !matches!(e.kind, EventKind::Access(_))
                && e.paths.iter().any(|p| p.file_name() == index.file_name())
        }
        Err(_) => true,
    }
}
