//! The SOS owner's state: its open SOS, the board it is on, and how its
//! posts and refreshes went. The decisions are [`super::Rank`]'s (`owner`).

use crate::cost::Costs;
use crate::protocol::{Claim, Entry, Level};

/// A rank as the owner of an SOS.
#[derive(Debug)]
pub(super) struct Owner {
    /// The open SOS, as listed in the index, and when it opened.
    pub(super) sos: Option<Entry>,
    /// The board of the open SOS, or of the last one.
    pub(super) level: Level,
    /// Last sequence number used.
    pub(super) last_seq: u64,
    /// Helpers' claims of the open SOS's slots (published in the SOS).
    pub(super) helped: Vec<Claim>,
    /// Posts that could not be written, in a row: at
    /// [`TRIES`](crate::cost::TRIES) the rank stops posting.
    pub(super) post_failures: u32,
    /// Slots were claimed back to be cut anew: the next check posts.
    pub(super) recut: bool,
    /// The last claim of own slots lost every one: the next claim of the
    /// front lists the claims first.
    pub(super) front_lost: bool,
    /// Refreshes in a row that found no new claim.
    quiet: u32,
    /// When a check last consulted the rank's own SOS.
    pub(super) last_look: f64,
}

impl Default for Owner {
    fn default() -> Owner {
        Owner {
            sos: None,
            level: Level::Shared,
            last_seq: 0,
            helped: Vec::new(),
            post_failures: 0,
            recut: false,
            front_lost: false,
            quiet: 0,
            last_look: f64::NEG_INFINITY,
        }
    }
}

impl Owner {
    /// True while an SOS is open.
    pub(super) fn is_open(&self) -> bool {
        self.sos.is_some()
    }

    /// When the open SOS is next due for a look, with the costs `costs`:
    /// an own period after the last, longer while refreshes find nothing.
    pub(super) fn next_look(&self, costs: &Costs) -> f64 {
        self.last_look + costs.own_period(self.level, self.quiet)
    }

    /// A new sequence number for a post.
    pub(super) fn next_seq(&mut self) -> u64 {
        self.last_seq += 1;
        self.last_seq
    }

    /// The SOS `entry` is posted; `opens`: it was closed.
    pub(super) fn posted(&mut self, entry: Entry, opens: bool) {
        self.post_failures = 0;
        if opens {
            self.quiet = 0;
        }
        self.sos = Some(entry);
    }

    /// A post could not be written; `opens`: the SOS stays closed.
    pub(super) fn not_posted(&mut self, opens: bool) {
        self.post_failures += 1;
        if opens {
            self.sos = None;
        }
    }

    /// A refresh came back; `found`: it brought claims or ids.
    pub(super) fn refreshed(&mut self, found: bool) {
        self.quiet = if found { 0 } else { self.quiet + 1 };
    }

    /// The SOS left the index: its sequence number.
    pub(super) fn withdrawn(&mut self) -> u64 {
        let seq = self.sos.take().map_or(self.last_seq, |e| e.seq);
        self.helped.clear();
        seq
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quiet_refreshes_space_the_looks_until_a_new_sos_opens() {
        let costs = Costs {
            op: [0.0; 2],
            check_interval: 1.0,
            late_threshold: 1.0,
            poll: 0.1,
        };
        let mut o = Owner::default();
        let entry = Entry {
            rank: 0,
            seq: o.next_seq(),
            forecast: 10.0,
            opened_at: 0.0,
            speed: 1.0,
        };
        o.posted(entry.clone(), true);
        o.last_look = 0.0;
        assert_eq!(o.next_look(&costs), 1.0);
        o.refreshed(false);
        assert_eq!(o.next_look(&costs), 2.0);
        o.refreshed(true);
        assert_eq!(o.next_look(&costs), 1.0);
        o.refreshed(false);
        assert_eq!(o.withdrawn(), 1);
        assert!(!o.is_open());
        o.posted(entry, true);
        assert_eq!(o.next_look(&costs), 1.0);
    }
}
