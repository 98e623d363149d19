//! Waking idle helpers without spinning (DESIGN §6, discovery).
//!
//! On a local file system a native watcher (inotify) on `open.ron` wakes a
//! waiting helper as soon as the index is rewritten. On a shared file system
//! ([`super::file::is_shared_fs`]) inotify only sees this host's writes, so
//! helpers poll it: the caller reads the index after each wait. The index
//! of the host's board is node-local, and watched wherever it is: a post
//! there wakes the host's idle ranks at once, not at the next termination
//! wave that counts it.

use super::Level;
use notify::{Event, EventKind, RecommendedWatcher, RecursiveMode, Watcher};
use std::path::{Path, PathBuf};
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
    /// The shared index is watched (else polled).
    shared: bool,
    /// The index of the host's board, when it is watched.
    host: Option<PathBuf>,
    fallback: Option<String>,
}

impl Discovery {
    /// Watch the index file `open_index_path` if `watch` is true, else poll.
    ///
    /// If the watcher cannot be set up, polls and remembers why
    /// ([`Discovery::fallback_reason`]).
    pub fn new(open_index_path: &Path, watch: bool) -> Discovery {
        let mut d = Discovery {
            watch: None,
            shared: false,
            host: None,
            fallback: None,
        };
        if watch {
            match d.add(open_index_path) {
                Ok(()) => d.shared = true,
                Err(e) => {
                    d.fallback = Some(format!(
                        "cannot watch {}: {e}; polling it instead",
                        open_index_path.display()
                    ))
                }
            }
        }
        d
    }

    /// Watch the index of the host's board, `host_index_path`, too. If it
    /// cannot be watched, its SOS are found at the termination waves, and
    /// [`Discovery::fallback_reason`] says why.
    pub fn with_host_index(mut self, host_index_path: &Path) -> Discovery {
        match self.add(host_index_path) {
            Ok(()) => self.host = Some(host_index_path.to_path_buf()),
            Err(e) => {
                let why = format!(
                    "cannot watch {}: {e}; the host's SOS are found at the termination waves",
                    host_index_path.display()
                );
                self.fallback = Some(match self.fallback.take() {
                    Some(f) => format!("{f}; {why}"),
                    None => why,
                });
            }
        }
        self
    }

    /// Add `path` to the watcher, which is made at the first.
    fn add(&mut self, path: &Path) -> notify::Result<()> {
        if let Some((w, _)) = &mut self.watch {
            return w.watch(path, RecursiveMode::NonRecursive);
        }
        let (tx, rx) = mpsc::channel();
        let mut w = notify::recommended_watcher(tx)?;
        w.watch(path, RecursiveMode::NonRecursive)?;
        self.watch = Some((w, rx));
        Ok(())
    }

    /// True when a native watcher is active on the shared index (false:
    /// polling it).
    pub fn is_watching(&self) -> bool {
        self.shared && self.watch.is_some()
    }

    /// Why watching was asked for but polling is used, if so.
    pub fn fallback_reason(&self) -> Option<&str> {
        self.fallback.as_deref()
    }

    /// Block until a watched index changes or `timeout` passes, and say
    /// which board's changed: the host's, when only its index did. Pending
    /// notifications are drained. With nothing watched, sleeps `timeout`
    /// and answers `None`. Uses no CPU while it waits.
    pub fn wait(&mut self, timeout: Duration) -> Option<Level> {
        let deadline = Instant::now() + timeout;
        let Some((_, rx)) = &self.watch else {
            thread::sleep(timeout);
            return None;
        };
        let mut changed = None;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let event = match changed {
                None => rx.recv_timeout(left),
                Some(_) => rx.try_recv().map_err(|_| RecvTimeoutError::Timeout),
            };
            match event {
                Ok(event) if !wakes(&event) => continue,
                Ok(event) => {
                    let host = self.host.as_deref();
                    let level = match &event {
                        Ok(e)
                            if !e.paths.is_empty()
                                && e.paths.iter().all(|p| Some(p.as_path()) == host) =>
                        {
                            Level::Host
                        }
                        _ => Level::Shared,
                    };
                    changed = Some(match (changed, level) {
                        (Some(Level::Shared), _) | (_, Level::Shared) => Level::Shared,
                        _ => Level::Host,
                    });
                }
                Err(RecvTimeoutError::Timeout) => return changed,
                Err(RecvTimeoutError::Disconnected) => {
                    self.watch = None;
                    self.fallback = Some("the file watcher stopped; polling instead".into());
                    thread::sleep(deadline.saturating_duration_since(Instant::now()));
                    return changed;
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
