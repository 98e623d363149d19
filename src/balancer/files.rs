//! The run's files: the run directory on the signal directory, the host's
//! node-local directory (its copy of the open index, its board), and their
//! removal at `finish`.

use crate::board::file::FileBoard;
use crate::board::node::Presence;
use crate::board::{Board, Probe};
use crate::comm::Comm;
use crate::config::Config;
use crate::protocol::{Level, Slot};
use std::path::{Path, PathBuf};

/// Where this rank's run keeps its files.
pub(super) struct RunFiles {
    /// The run directory.
    pub(super) job_dir: PathBuf,
    /// This host's copy of the open index (removed at the end).
    pub(super) host_copy: Option<PathBuf>,
    /// The rank's hold on its run's node-local directory (let go at the end).
    pub(super) presence: Option<Presence>,
    /// The host's board (node-local), and whether this rank is the host's
    /// lowest, which removes it.
    pub(super) host_board_dir: Option<(PathBuf, bool)>,
}

impl RunFiles {
    /// After a clean run: remove this rank's own signal files and its
    /// won `claims`. A failure is a warning.
    pub(super) fn remove_own(&self, me: usize, claims: &[String]) {
        if let Err(e) = crate::board::file::remove_own(&self.job_dir, me, claims) {
            crate::error::warn(me, &format!("could not remove its signal files: {e}"));
        }
    }

    /// The end of the run (every rank is here, and every descriptor on the
    /// files is closed): the run directory goes after a `clean` run (it
    /// stays after a failure, for a post-mortem); the hosts' boards are
    /// node-local (a batch system seldom lets anyone read them after the
    /// job) and go whatever the outcome, unless the config keeps the files.
    pub(super) fn remove(self, comm: &Comm, config: &Config, clean: bool) {
        if !config.keep {
            comm.quiet_barrier();
            if clean && comm.rank() == 0 {
                remove_signal_files(&self.job_dir, config.log);
            }
            if let Some((dir, true)) = &self.host_board_dir
                && let Err(e) = std::fs::remove_dir_all(dir)
            {
                crate::error::warn(
                    comm.rank(),
                    &format!("cannot remove the host's board {}: {e}", dir.display()),
                );
            }
        }
        // A node-local cache, whatever the outcome: each rank tries (a rank
        // still looking for help reads the shared index).
        if let Some(copy) = self.host_copy {
            let _ = std::fs::remove_file(copy);
        }
        // The last rank of the host out removes the directory. (Without a
        // hold on it, its lock file stays: a later sweep removes it.)
        if let Some(p) = self.presence {
            p.leave();
        }
    }

    /// The first of this rank's `won` claims whose file is gone, names
    /// another rank, or was won twice: removed during the run (and perhaps
    /// made again).
    pub(super) fn removed_claim(&self, me: usize, won: &[(Level, usize, Slot)]) -> Option<String> {
        let mut boards = self.boards(me)?;
        won.iter()
            .enumerate()
            .find_map(|(k, (level, owner, slot))| {
                let board = boards.at(*level);
                let now = match board.probe(*owner, slot) {
                    _ if won[..k].contains(&won[k]) => "was won twice".to_string(),
                    Ok(Probe::Taken(Some(c))) if c.by != me => format!("names rank {}", c.by),
                    Ok(Probe::Free) => "is gone".to_string(),
                    _ => return None,
                };
                let path = board.claim_path(*owner, slot);
                Some(removed(&path, &now, me, slot))
            })
    }

    /// After ids were lost: the first of this rank's own slots, lost to a
    /// claim it could not read (`unread`), whose file still holds no claim
    /// of it, or is gone. (Every helper has finished: a claim is complete.)
    pub(super) fn unclaimed(&self, me: usize, unread: &[(Level, Slot)]) -> Option<String> {
        if unread.is_empty() {
            return None;
        }
        let mut boards = self.boards(me)?;
        unread.iter().find_map(|(level, slot)| {
            let board = boards.at(*level);
            let now = match board.probe(me, slot) {
                Ok(Probe::Taken(None)) => "holds no claim",
                Ok(Probe::Free) => "is gone",
                _ => return None,
            };
            Some(format!(
                "rank {me} lost its claim of ids {}..{} to {}, which {now}: those ids may never \
                 have been computed (a file written into, or removed from, the run directory \
                 during the run?)",
                slot.start,
                slot.end,
                board.claim_path(me, slot).display()
            ))
        })
    }

    /// This rank's handles on the shared board and the host's.
    fn boards(&self, me: usize) -> Option<Boards> {
        Some(Boards {
            shared: FileBoard::open(&self.job_dir, me).ok()?,
            host: (self.host_board_dir.as_ref()).and_then(|(d, _)| FileBoard::open(d, me).ok()),
        })
    }
}

/// The boards a rank's claims are on.
struct Boards {
    shared: FileBoard,
    host: Option<FileBoard>,
}

impl Boards {
    /// The board of `level` (the shared one if the host has none).
    fn at(&mut self, level: Level) -> &mut FileBoard {
        match (level, &mut self.host) {
            (Level::Host, Some(h)) => h,
            _ => &mut self.shared,
        }
    }
}

/// The audit's error naming the claim file at `path` of rank `me`'s `slot`,
/// which `now` "is gone", "names rank 3" or "was won twice".
fn removed(path: &Path, now: &str, me: usize, slot: &Slot) -> String {
    format!(
        "{} {now}, and rank {me} claimed ids {}..{} in it: the file was removed during the run, \
         so some ids were computed twice and, the count being reached, others may never have \
         been",
        path.display(),
        slot.start,
        slot.end
    )
}

/// After a clean finalize: remove the signal files of the run, and the whole
/// run directory when there are no monitor logs. A failure is a warning.
fn remove_signal_files(job_dir: &Path, keep_logs: bool) {
    let removed = if keep_logs {
        ["sos", "aid"]
            .iter()
            .map(|d| std::fs::remove_dir_all(job_dir.join(d)))
            .chain(
                ["job.ron", "open.ron"]
                    .iter()
                    .map(|f| std::fs::remove_file(job_dir.join(f))),
            )
            .find(|r| r.is_err())
            .unwrap_or(Ok(()))
    } else {
        std::fs::remove_dir_all(job_dir)
    };
    if let Err(e) = removed {
        crate::error::warn(
            0,
            &format!(
                "could not remove the signal files of {}: {e}",
                job_dir.display()
            ),
        );
    }
}
