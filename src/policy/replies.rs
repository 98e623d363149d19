//! The clerk's replies: what a post, a refresh, a claim, a withdrawal or a
//! search came to, applied to the rank's ledger and reports.

use super::request::{Outcome, Reply, Taken};
use super::step::{Aid, Event};
use super::{Asking, Rank};
use crate::error::{Error, Result};
use crate::ids::IdSet;
use crate::protocol::{Claim, Entry, Level, Slot};

impl Rank {
    /// The clerk's reply to the request out. An error is one the rank
    /// cannot recover from (a claim of its own slot that neither won nor
    /// lost): the rank fails.
    pub fn reply(&mut self, reply: Reply) -> Result<()> {
        let Some(asking) = self.asking.take() else {
            return Err(Error::Internal("a reply without a request".into()));
        };
        if let Some(seconds) = reply.seconds {
            self.timings.observe(seconds, reply.ops, reply.looks);
        }
        for error in reply.errors {
            self.report.errors += 1;
            self.events.push(Event::Recovered { error });
        }
        match (asking, reply.outcome) {
            (_, Outcome::Failed(e)) => return Err(e),
            (Asking::Post { entry, new, opens }, Outcome::Posted { .. }) => {
                self.posted(entry, new, opens)
            }
            (Asking::Post { opens, .. }, Outcome::NotPosted) => {
                // Nobody saw the slots: they are claimed back as the rank
                // goes, as a withdrawn SOS's are.
                self.owner.not_posted(opens);
            }
            (Asking::Refresh { level }, Outcome::Refreshed { won, taken }) => {
                let front = won.len();
                let ids = self.claimed(level, won, taken);
                self.ledger.lease.extend(&ids);
                self.owner.refreshed(front > 0 || !ids.is_empty());
            }
            (Asking::Claim { level }, Outcome::Claimed { won, lost }) => {
                self.owner.front_lost = won.is_empty() && !lost.is_empty();
                let ids = self.claimed(level, won, lost);
                self.ledger.lease.extend(&ids);
            }
            (Asking::Give { level, sends }, Outcome::Claimed { won, lost }) => {
                let ids = self.claimed(level, won, lost);
                self.ready(sends, ids);
            }
            (Asking::Withdraw { forecast, moving }, Outcome::Withdrawn) => {
                self.withdrawn(forecast, moving)
            }
            (Asking::Help { early }, Outcome::Helped { taken, wake }) => match taken {
                Some(taken) => self.helped(taken, reply.ops),
                // (An early look that found nothing does not hold back the
                // searches of a rank that runs out of work.)
                None if early => {}
                None => self.helper.search_at = Some(wake),
            },
            (asking, outcome) => {
                return Err(Error::Internal(format!(
                    "the reply {outcome:?} does not answer {asking:?}"
                )));
            }
        }
        Ok(())
    }

    /// The SOS `entry` is posted; `new`: the ids cut into new slots;
    /// `opens`: it was closed.
    fn posted(&mut self, entry: Entry, new: IdSet, opens: bool) {
        let mut tail = new;
        for s in self.ledger.pending_on(self.owner.level) {
            tail.insert(s.ids());
        }
        self.events.push(Event::SosPosted {
            seq: entry.seq,
            tail,
            forecast: entry.forecast,
        });
        if opens {
            self.report.sos_posted += 1;
        }
        self.owner.posted(entry, opens);
    }

    /// The own SOS left the index; `moving`: to the other board, posted
    /// there at the next check, which comes at once.
    fn withdrawn(&mut self, forecast: f64, moving: bool) {
        let seq = self.owner.withdrawn();
        let kept = self.ledger.pending_ids();
        if kept.is_empty() {
            self.events.push(Event::SosClosed { seq });
        } else {
            self.events.push(Event::SosWithdrawn {
                seq,
                reclaimed: kept,
                forecast,
            });
        }
        if moving {
            self.next_check = f64::NEG_INFINITY;
        }
    }

    /// A search took `taken` in `ops` storage operations (shared board,
    /// host's board).
    fn helped(&mut self, taken: Taken, ops: [u64; 2]) {
        let Taken {
            owner,
            level,
            slots,
            ends,
        } = taken;
        match level {
            Level::Shared => {
                self.report.steals.0 += 1;
                self.report.steals.1 += ops[crate::cost::slot(level)];
            }
            Level::Host => self.report.host_steals += 1,
        }
        self.took(owner, level, slots);
        self.helper.took(ends);
    }

    /// The ids of the own slots `won` on `level`'s board; `lost`: claimed
    /// by others.
    fn claimed(&mut self, level: Level, won: Vec<Slot>, lost: Vec<(Slot, Option<Claim>)>) -> IdSet {
        let mut ids = IdSet::new();
        for s in won {
            self.ledger.drop_pending(&s);
            ids.insert(s.ids());
            self.ledger.won.push((level, self.me, s));
        }
        for (s, claim) in lost {
            self.lost(level, &s, claim);
        }
        ids
    }

    /// Another rank claimed the slot `s` of this rank on `level`'s board
    /// (`claim`, if read).
    fn lost(&mut self, level: Level, s: &Slot, claim: Option<Claim>) {
        if !self.ledger.holds(s) {
            return;
        }
        self.ledger.drop_pending(s);
        self.report.given += s.len();
        let aid = match &claim {
            Some(c) => Aid::from(c),
            None => {
                self.ledger.unread.push((level, s.clone()));
                Aid {
                    helper: None,
                    ids: IdSet::from_range(s.ids()),
                    at: f64::NAN,
                    speed: f64::NAN,
                }
            }
        };
        if let Some(c) = claim {
            self.owner.helped.push(c);
        }
        self.events.push(Event::AidReceived { seq: s.seq, aid });
    }

    /// The clerk claimed `slots` of `owner`'s SOS on `level`'s board for
    /// this rank.
    fn took(&mut self, owner: usize, level: Level, slots: Vec<Slot>) {
        let mut ids = IdSet::new();
        for s in &slots {
            ids.insert(s.ids());
        }
        self.report.taken += ids.len();
        let d = self.topology.distance(self.me, owner).min(2);
        self.report.given_to[d as usize] += ids.len();
        self.ledger.lease.extend(&ids);
        let seq = slots.first().map_or(0, |s| s.seq);
        self.ledger
            .won
            .extend(slots.into_iter().map(|s| (level, owner, s)));
        self.events.push(Event::AidGiven { owner, seq, ids });
    }
}
