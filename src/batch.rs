//! The walltime from the batch system itself (DESIGN §11), where no
//! variable gives it: Debian's Slurm 22.05 sets neither `SLURM_JOB_END_TIME`
//! nor `SLURM_JOB_START_TIME`, only `SLURM_JOB_ID`, and PBS sets
//! `PBS_JOBID`. Rank 0 asks once per process, at its first init, with a
//! timeout: Slurm with `squeue -h -j <id> -o %e` (then `scontrol show job
//! <id>`), PBS with `qstat -f <id>`. The parsing is pure; [`ask`] runs the
//! commands.

use crate::comm::Comm;
use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How long a command may take before it counts as unanswered.
pub const TIMEOUT: Duration = Duration::from_secs(5);

/// Whom to ask for the job's end.
#[derive(Clone, Debug, PartialEq)]
pub enum Query {
    /// A Slurm job, by `SLURM_JOB_ID`.
    Slurm(String),
    /// A PBS (PBS Pro, OpenPBS, Torque) job, by `PBS_JOBID`.
    Pbs(String),
}

/// What the batch system said of the job's end.
#[derive(Clone, Debug, PartialEq)]
pub enum Answer {
    /// The end, seconds since 1970, and where it came from (for the messages).
    End(f64, String),
    /// The job has no time limit.
    Unlimited(String),
}

/// The query for a process whose environment `var` gives: none when
/// `SLURM_JOB_END_TIME` is set (it says the end itself) or when no job id is.
pub fn query(var: impl Fn(&str) -> Option<String>) -> Option<Query> {
    let set = |k: &str| var(k).filter(|v| !v.trim().is_empty());
    if set("SLURM_JOB_END_TIME").is_some() {
        return None;
    }
    if let Some(id) = set("SLURM_JOB_ID") {
        return Some(Query::Slurm(id.trim().to_string()));
    }
    set("PBS_JOBID").map(|id| Query::Pbs(id.trim().to_string()))
}

/// A Slurm time as printed under `SLURM_TIME_FORMAT=%s`: seconds since
/// 1970; `Ok(None)` for what Slurm prints for no end (`Unknown`, `N/A`,
/// `NONE`, `UNLIMITED`).
pub fn slurm_time(text: &str) -> Result<Option<f64>, String> {
    let t = text.trim();
    match t {
        "Unknown" | "N/A" | "NONE" | "None" | "UNLIMITED" | "INFINITE" => Ok(None),
        _ => t
            .parse::<i64>()
            .map(|s| Some(s as f64))
            .map_err(|_| format!("`{t}` is not a time in seconds since 1970")),
    }
}

/// The end time of `squeue -h -j <id> -o %e` (one line).
pub fn parse_squeue(out: &str) -> Result<Option<f64>, String> {
    let mut lines = out.lines().filter(|l| !l.trim().is_empty());
    match (lines.next(), lines.next()) {
        (Some(line), None) => slurm_time(line),
        (None, _) => Err("squeue printed nothing: the job is not in the queue".into()),
        (Some(_), Some(_)) => Err(format!("squeue printed several lines: `{}`", out.trim())),
    }
}

/// The `EndTime=` of `scontrol show job <id>`.
pub fn parse_scontrol(out: &str) -> Result<Option<f64>, String> {
    let end = out
        .split_whitespace()
        .find_map(|w| w.strip_prefix("EndTime="))
        .ok_or_else(|| format!("no EndTime= in `{}`", out.trim()))?;
    slurm_time(end)
}

/// A PBS duration, `[[hours:]minutes:]seconds[.fraction]`, in seconds.
pub fn pbs_duration(text: &str) -> Result<f64, String> {
    let t = text.trim();
    let bad = || format!("`{t}` is not a PBS walltime ([[hours:]minutes:]seconds)");
    let parts: Vec<&str> = t.split(':').collect();
    if parts.len() > 3 || parts.iter().any(|p| p.is_empty()) {
        return Err(bad());
    }
    let mut seconds = 0.0;
    for (i, p) in parts.iter().rev().enumerate() {
        let v: f64 = p.parse().map_err(|_| bad())?;
        if !(v >= 0.0 && v.is_finite()) {
            return Err(bad());
        }
        seconds += v * [1.0, 60.0, 3600.0][i];
    }
    Ok(seconds)
}

/// The job's end from `qstat -f <id>` at `now` (seconds since 1970): the
/// start (Torque's `start_time`, seconds since 1970) plus
/// `Resource_List.walltime`, else `now` plus the walltime less
/// `resources_used.walltime`. `Ok(None)` when the job has no walltime.
pub fn parse_qstat(out: &str, now: f64) -> Result<Option<f64>, String> {
    // `key = value` lines; long values continue on indented lines, which
    // the keys read here never need.
    let value = |key: &str| {
        out.lines().find_map(|l| {
            let (k, v) = l.split_once('=')?;
            (k.trim() == key).then(|| v.trim().to_string())
        })
    };
    let Some(limit) = value("Resource_List.walltime") else {
        return Ok(None);
    };
    let limit = pbs_duration(&limit)?;
    if let Some(start) = value("start_time").and_then(|s| s.parse::<i64>().ok()) {
        return Ok(Some(start as f64 + limit));
    }
    match value("resources_used.walltime") {
        Some(used) => Ok(Some(now + limit - pbs_duration(&used)?)),
        None => Err("qstat -f gives the walltime but neither start_time nor \
                     resources_used.walltime: the job does not run yet?"
            .into()),
    }
}

/// Run `cmd` and return its stdout, or why not: it could not start, took
/// longer than `timeout` (then it is killed), or failed (its stderr).
pub fn run(mut cmd: Command, timeout: Duration) -> Result<String, String> {
    let shown = format!("{cmd:?}").replace('"', "");
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run {shown}: {e}"))?;
    let (mut out, mut err) = (child.stdout.take(), child.stderr.take());
    // Read the pipes aside, so that a chatty command cannot block on them.
    let reader = std::thread::spawn(move || {
        let (mut o, mut e) = (String::new(), String::new());
        if let Some(p) = out.as_mut() {
            let _ = p.read_to_string(&mut o);
        }
        if let Some(p) = err.as_mut() {
            let _ = p.read_to_string(&mut e);
        }
        (o, e)
    });
    let start = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if start.elapsed() < timeout => std::thread::sleep(Duration::from_millis(10)),
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "{shown} did not answer in {} s",
                    timeout.as_secs_f64()
                ));
            }
            Err(e) => return Err(format!("{shown}: {e}")),
        }
    };
    let (out, err) = reader.join().unwrap_or_default();
    if status.success() {
        Ok(out)
    } else {
        Err(format!("{shown} failed ({status}): {}", err.trim()))
    }
}

/// A Slurm command with times in seconds since 1970.
fn slurm(program: &str, args: &[&str]) -> Command {
    let mut c = Command::new(program);
    c.args(args).env("SLURM_TIME_FORMAT", "%s");
    c
}

/// Ask the batch system for the job's end; an error says what was tried
/// and why it failed.
pub fn ask(query: &Query, timeout: Duration) -> Result<Answer, String> {
    let answer = |end: Option<f64>, source: String| match end {
        Some(end) => Answer::End(end, source),
        None => Answer::Unlimited(source),
    };
    match query {
        Query::Slurm(id) => {
            let squeue = run(slurm("squeue", &["-h", "-j", id, "-o", "%e"]), timeout)
                .and_then(|out| parse_squeue(&out));
            let first = match squeue {
                Ok(end) => return Ok(answer(end, format!("Slurm: squeue -j {id}"))),
                Err(e) => e,
            };
            run(slurm("scontrol", &["show", "job", id]), timeout)
                .and_then(|out| parse_scontrol(&out))
                .map(|end| answer(end, format!("Slurm: scontrol show job {id}")))
                .map_err(|e| format!("{first}; {e}"))
        }
        Query::Pbs(id) => {
            let mut qstat = Command::new("qstat");
            qstat.args(["-f", id]);
            let out = run(qstat, timeout)?;
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0.0, |d| d.as_secs_f64());
            parse_qstat(&out, now).map(|end| answer(end, format!("PBS: qstat -f {id}")))
        }
    }
}

/// What rank 0 tells the others: the answer, or why there is none, as one
/// line (`end <seconds> <source>`, `unlimited <source>`, `error <text>`,
/// or empty when there was nothing to ask).
pub fn encode(answer: &Option<Result<Answer, String>>) -> String {
    match answer {
        None => String::new(),
        Some(Ok(Answer::End(end, source))) => format!("end {end} {source}"),
        Some(Ok(Answer::Unlimited(source))) => format!("unlimited {source}"),
        Some(Err(e)) => format!("error {e}"),
    }
}

/// The inverse of [`encode`].
pub fn decode(text: &str) -> Option<Result<Answer, String>> {
    let (kind, rest) = text.split_once(' ').unwrap_or((text, ""));
    match kind {
        "end" => {
            let (end, source) = rest.split_once(' ').unwrap_or((rest, ""));
            Some(match end.parse() {
                Ok(end) => Ok(Answer::End(end, source.to_string())),
                Err(_) => Err(format!("a garbled answer from rank 0: `{text}`")),
            })
        }
        "unlimited" => Some(Ok(Answer::Unlimited(rest.to_string()))),
        "error" => Some(Err(rest.to_string())),
        _ => None,
    }
}

/// The batch system's answer, on every rank of `comm`: rank 0 asks at the
/// first init of the process (the answer is kept for later inits) and
/// broadcasts it. `None` when there is nothing to ask (no job id, or
/// `SLURM_JOB_END_TIME` is set); an error says why there is no answer, at
/// the first init only (one warning per process).
pub(crate) fn walltime(comm: &Comm) -> Option<Result<Answer, String>> {
    static ASKED: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    static SAID: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    let mine = if comm.rank() == 0 {
        ASKED
            .get_or_init(|| {
                let q = query(|k| std::env::var(k).ok());
                encode(&q.map(|q| ask(&q, TIMEOUT)))
            })
            .clone()
    } else {
        String::new()
    };
    let answer = decode(&comm.broadcast_string(&mine, 0));
    let said = SAID.swap(true, std::sync::atomic::Ordering::Relaxed);
    answer.filter(|a| a.is_ok() || !said)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k| {
            vars.iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn whom_to_ask() {
        assert_eq!(query(env(&[])), None);
        assert_eq!(
            query(env(&[("SLURM_JOB_ID", "42"), ("PBS_JOBID", "7.pbs")])),
            Some(Query::Slurm("42".into()))
        );
        assert_eq!(
            query(env(&[
                ("SLURM_JOB_ID", "42"),
                ("SLURM_JOB_END_TIME", "1795793371")
            ])),
            None,
            "Slurm says the end itself"
        );
        assert_eq!(
            query(env(&[("PBS_JOBID", "7.server")])),
            Some(Query::Pbs("7.server".into()))
        );
        assert_eq!(query(env(&[("SLURM_JOB_ID", " ")])), None);
    }

    #[test]
    fn slurm_end_times() {
        assert_eq!(parse_squeue("1795793371\n"), Ok(Some(1795793371.0)));
        assert_eq!(parse_squeue("Unknown\n"), Ok(None));
        assert_eq!(parse_squeue("N/A"), Ok(None));
        assert!(parse_squeue("").unwrap_err().contains("not in the queue"));
        assert!(
            parse_squeue("1\n2\n")
                .unwrap_err()
                .contains("several lines")
        );
        // Without SLURM_TIME_FORMAT=%s Slurm prints local times: refused.
        assert!(
            parse_squeue("2026-11-27T15:29:31")
                .unwrap_err()
                .contains("2026-11-27T15:29:31")
        );
        let scontrol = "JobId=5 JobName=job.sh\n   RunTime=00:00:03 TimeLimit=00:01:00 TimeMin=N/A\n   \
                        SubmitTime=1795793310 EligibleTime=1795793310\n   StartTime=1795793311 \
                        EndTime=1795793371 Deadline=N/A\n";
        assert_eq!(parse_scontrol(scontrol), Ok(Some(1795793371.0)));
        assert_eq!(parse_scontrol("JobId=5 EndTime=Unknown"), Ok(None));
        assert!(parse_scontrol("slurm_load_jobs error: Invalid job id").is_err());
    }

    #[test]
    fn pbs_walltimes() {
        assert_eq!(pbs_duration("01:00:00"), Ok(3600.0));
        assert_eq!(
            pbs_duration("100:30:05"),
            Ok(100.0 * 3600.0 + 30.0 * 60.0 + 5.0)
        );
        assert_eq!(pbs_duration("90"), Ok(90.0));
        assert_eq!(pbs_duration("2:30"), Ok(150.0));
        for bad in ["", "1:2:3:4", "a:00", "1::2", "-1:00"] {
            assert!(pbs_duration(bad).is_err(), "{bad}");
        }
        // PBS Pro: the time used so far.
        let pro = "Job Id: 7.server\n    Job_Name = slab\n    resources_used.walltime = 00:10:00\n    \
                   Resource_List.walltime = 01:00:00\n    stime = Fri Nov 27 15:00:00 2026\n";
        assert_eq!(parse_qstat(pro, 1000.0), Ok(Some(1000.0 + 3000.0)));
        // Torque: the start in seconds since 1970.
        let torque = "Job Id: 8.torque\n    Resource_List.walltime = 00:02:00\n    start_time = 1795793311\n";
        assert_eq!(parse_qstat(torque, 0.0), Ok(Some(1795793311.0 + 120.0)));
        assert_eq!(parse_qstat("Job Id: 9\n    Job_Name = x\n", 0.0), Ok(None));
        assert!(parse_qstat("    Resource_List.walltime = 00:02:00\n", 0.0).is_err());
    }

    #[test]
    fn answers_cross_the_broadcast_whole() {
        for a in [
            None,
            Some(Ok(Answer::End(1795793371.0, "Slurm: squeue -j 5".into()))),
            Some(Ok(Answer::Unlimited("PBS: qstat -f 7.server".into()))),
            Some(Err("squeue failed: no controller".into())),
        ] {
            assert_eq!(decode(&encode(&a)), a);
        }
    }

    #[test]
    fn a_command_that_hangs_is_killed_at_the_timeout() {
        let t = Instant::now();
        let mut sleep = Command::new("sleep");
        sleep.arg("10");
        let e = run(sleep, Duration::from_millis(200)).unwrap_err();
        assert!(e.contains("did not answer in 0.2 s"), "{e}");
        assert!(t.elapsed() < Duration::from_secs(2));
        let e = run(Command::new("soslb-no-such-command"), TIMEOUT).unwrap_err();
        assert!(e.contains("cannot run soslb-no-such-command"), "{e}");
        let mut fail = Command::new("sh");
        fail.args(["-c", "echo nope >&2; exit 3"]);
        let e = run(fail, TIMEOUT).unwrap_err();
        assert!(e.contains("nope") && e.contains("3"), "{e}");
    }
}
