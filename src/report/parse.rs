//! Reading monitor logs back: one [`Record`] per whole line (the format is
//! in [`crate::monitor`]). Pure: text in, records and warnings out.

use crate::ids::IdSet;
use crate::policy::Aid;
use crate::policy::Event;

/// What one log line says: the state machine's events as
/// [`crate::monitor::Monitor::event`] wrote them, and the lines the shell
/// adds that the report uses; anything else is [`Line::Other`].
#[derive(Clone, Debug, PartialEq)]
pub enum Line {
    /// `init ranks= total= host= mode=`.
    Init {
        /// Ranks of the job.
        ranks: usize,
        /// Realisations of the job.
        total: u64,
        /// This rank's host.
        host: String,
        /// `Static`, `Warmup` or `Full`.
        mode: String,
    },
    /// `progress`, `plan`, `sos-posted`, `aid-given`, `aid-received`,
    /// `transfer-received`.
    Event(Event),
    /// `verdict`: the job's end as this rank saw it.
    Verdict {
        /// Realisations this rank computed.
        computed: u64,
    },
    /// Any other line (warnings, SOS withdrawals, finalize, ...).
    Other,
}

/// One whole line of a monitor log.
#[derive(Clone, Debug, PartialEq)]
pub struct Record {
    /// The rank that wrote it.
    pub rank: usize,
    /// Job time, seconds since the common start.
    pub t: f64,
    /// What happened.
    pub line: Line,
}

/// The records of one log file, and what was wrong with it.
#[derive(Debug, Default)]
pub struct Parsed {
    /// The whole, readable lines, in order.
    pub records: Vec<Record>,
    /// One message per problem, each naming `origin` and the line.
    pub warnings: Vec<String>,
}

/// `key=value` of a line, or a message naming the key.
fn field<'a>(fields: &[(&'a str, &'a str)], key: &str) -> Result<&'a str, String> {
    fields
        .iter()
        .find(|(k, _)| *k == key)
        .map(|(_, v)| *v)
        .ok_or_else(|| format!("no field `{key}`"))
}

fn num<T: std::str::FromStr>(fields: &[(&str, &str)], key: &str) -> Result<T, String> {
    let v = field(fields, key)?;
    v.parse()
        .map_err(|_| format!("field `{key}`: {v:?} is not a number"))
}

/// `a..b,c..d` (or `-`, the empty set), as [`IdSet`]'s `Display` writes it.
pub fn parse_ids(text: &str) -> Result<IdSet, String> {
    let mut set = IdSet::new();
    if text == "-" {
        return Ok(set);
    }
    for run in text.split(',') {
        let (a, b) = run
            .split_once("..")
            .ok_or_else(|| format!("{run:?} is not a range a..b"))?;
        let bad = || format!("{run:?} is not a range a..b");
        let (a, b): (u64, u64) = (a.parse().map_err(|_| bad())?, b.parse().map_err(|_| bad())?);
        if a > b {
            return Err(bad());
        }
        set.insert(a..b);
    }
    Ok(set)
}

/// One line (without its newline).
pub fn parse_line(line: &str) -> Result<Record, String> {
    let mut words = line.split_ascii_whitespace();
    let _stamp = words.next().ok_or("empty line")?;
    let head: Vec<(&str, &str)> = words
        .by_ref()
        .take(2)
        .filter_map(|w| w.split_once('='))
        .collect();
    let rank = num(&head, "rank")?;
    let t = num(&head, "t")?;
    let kind = words.next().ok_or("no event after t=")?;
    let fields: Vec<(&str, &str)> = words.filter_map(|w| w.split_once('=')).collect();
    let f = &fields;
    let line = match kind {
        "init" => Line::Init {
            ranks: num(f, "ranks")?,
            total: num(f, "total")?,
            host: field(f, "host")?.to_string(),
            mode: field(f, "mode")?.to_string(),
        },
        "verdict" => Line::Verdict {
            computed: num(f, "computed")?,
        },
        _ => parse_event(kind, f)?.map_or(Line::Other, Line::Event),
    };
    Ok(Record { rank, t, line })
}

/// The event of `kind` with fields `f`, or `None` when `kind` is not one
/// the report reads.
fn parse_event(kind: &str, f: &[(&str, &str)]) -> Result<Option<Event>, String> {
    let ids = |key: &str| parse_ids(field(f, key)?).map_err(|e| format!("field `{key}`: {e}"));
    Ok(Some(match kind {
        "progress" => Event::Progress {
            ids: ids("ids")?,
            done: num(f, "done")?,
            speed: num(f, "speed")?,
            remaining: num(f, "remaining")?,
            forecast: num(f, "forecast")?,
        },
        "plan" => Event::Plan {
            quota: ids("quota")?,
            speed: num(f, "speed")?,
            horizon: num(f, "horizon")?,
        },
        "sos-posted" => Event::SosPosted {
            seq: num(f, "seq")?,
            tail: ids("tail")?,
            forecast: num(f, "forecast")?,
        },
        "aid-given" => Event::AidGiven {
            owner: num(f, "owner")?,
            seq: num(f, "seq")?,
            ids: ids("ids")?,
        },
        "transfer-received" => Event::Received {
            from: num(f, "from")?,
            ids: ids("ids")?,
        },
        "aid-received" => Event::AidReceived {
            seq: num(f, "seq")?,
            aid: Aid {
                helper: match field(f, "helper")? {
                    "?" => None,
                    _ => Some(num(f, "helper")?),
                },
                ids: ids("ids")?,
                at: num(f, "at")?,
                speed: num(f, "helper_speed")?,
            },
        },
        _ => return Ok(None),
    }))
}

/// The records of a log's text. A last line without its newline (a job
/// killed while writing) is left out with a warning, as is a line that
/// cannot be read; `origin` (the path) names them.
pub fn parse_log(text: &str, origin: &str) -> Parsed {
    let mut out = Parsed::default();
    let mut lines: Vec<&str> = text.split('\n').collect();
    if let Some(last) = lines.pop().filter(|l| !l.is_empty()) {
        out.warnings.push(format!(
            "{origin}:{}: the last line is cut ({} bytes without a newline; a killed job?): \
             read up to the last whole record",
            lines.len() + 1,
            last.len()
        ));
    }
    for (i, line) in lines.iter().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match parse_line(line) {
            Ok(r) => out.records.push(r),
            Err(e) => out
                .warnings
                .push(format!("{origin}:{}: {e}: line skipped", i + 1)),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOG: &str = "\
2026-11-22T08:46:21.400509Z rank=0 t=0.000000 init ranks=4 total=400 host=vm site=site mode=Full job_dir=/x discovery=watch
2026-11-22T08:46:21.656099Z rank=0 t=0.255036 progress done=25 speed=98.3559 remaining=75 forecast=1.0176 ids=0..25
2026-11-22T08:46:22.411999Z rank=0 t=1.010943 plan speed=98.3205 horizon=1.1352 quota_len=12 quota=99..100,359..370
2026-11-22T08:46:22.5Z rank=0 t=1.2 aid-given owner=3 seq=1 ids_len=4 ids=396..400
2026-11-22T08:46:22.6Z rank=0 t=1.3 aid-received seq=2 helper=1 at=1.2 helper_speed=98.1 ids_len=7 ids=1..8
2026-11-22T08:46:22.7Z rank=0 t=1.4 warning waited 3 s for rank(s) 2, which owned work
2026-11-22T08:46:22.8Z rank=0 t=1.42 transfer-received from=2 ids_len=3 ids=200..203
2026-11-22T08:46:22.837249Z rank=0 t=1.436193 verdict Done computed=111
";

    #[test]
    fn every_event_of_a_log() {
        let p = parse_log(LOG, "vm.0.log");
        assert!(p.warnings.is_empty(), "{:?}", p.warnings);
        let lines: Vec<&Line> = p.records.iter().map(|r| &r.line).collect();
        assert_eq!(
            lines[0],
            &Line::Init {
                ranks: 4,
                total: 400,
                host: "vm".into(),
                mode: "Full".into()
            }
        );
        let event = |i: usize| match lines[i] {
            Line::Event(e) => e.clone(),
            l => panic!("{l:?}"),
        };
        let set = |s: &str| parse_ids(s).unwrap();
        assert_eq!(
            event(1),
            Event::Progress {
                ids: set("0..25"),
                done: 25,
                speed: 98.3559,
                remaining: 75,
                forecast: 1.0176
            }
        );
        assert_eq!(
            event(2),
            Event::Plan {
                quota: set("99..100,359..370"),
                speed: 98.3205,
                horizon: 1.1352
            }
        );
        assert_eq!(
            event(3),
            Event::AidGiven {
                owner: 3,
                seq: 1,
                ids: set("396..400")
            }
        );
        match event(4) {
            Event::AidReceived { seq, aid } => {
                assert_eq!(
                    (seq, aid.helper, aid.ids.len(), aid.at, aid.speed),
                    (2, Some(1), 7, 1.2, 98.1)
                )
            }
            e => panic!("{e:?}"),
        }
        assert_eq!(lines[5], &Line::Other);
        assert_eq!(
            event(6),
            Event::Received {
                from: 2,
                ids: set("200..203")
            }
        );
        assert_eq!(lines[7], &Line::Verdict { computed: 111 });
        assert_eq!(p.records[7].t, 1.436193);
    }

    #[test]
    fn a_cut_log_is_read_to_its_last_whole_line() {
        let cut = &LOG[..LOG.len() - 20];
        let p = parse_log(cut, "vm.0.log");
        assert_eq!(p.records.len(), 7);
        assert_eq!(p.warnings.len(), 1);
        assert!(p.warnings[0].starts_with("vm.0.log:8: the last line is cut"));
    }

    #[test]
    fn a_bad_line_is_named_and_skipped() {
        let text = LOG.replace("done=25", "done=x");
        let p = parse_log(&text, "vm.0.log");
        assert_eq!(p.records.len(), 7);
        assert_eq!(
            p.warnings,
            ["vm.0.log:2: field `done`: \"x\" is not a number: line skipped"]
        );
    }

    #[test]
    fn id_lists() {
        assert_eq!(parse_ids("-").map(|s| s.len()), Ok(0));
        assert_eq!(parse_ids("0..3,5..6").map(|s| s.len()), Ok(4));
        assert!(parse_ids("3..1").is_err());
        assert!(parse_ids("3").is_err());
    }
}
