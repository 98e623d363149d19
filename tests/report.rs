//! `soslb report` on the logs of a real MPI run of the emulator: the table
//! adds up against the ids the ranks really computed, every id once; a cut
//! log is read to its last whole line; the pictures are PNG files of a
//! reasonable size. `soslb plot` draws a CSV and names a bad cell.

mod common;

use common::{example, field, mpirun, run, temp_dir};
use soslb::ids::IdSet;
use std::path::{Path, PathBuf};
use std::process::Command;

const SOSLB: &str = env!("CARGO_BIN_EXE_soslb");
const TOTAL: u64 = 800;

/// 4 ranks; rank 3 slows down five-fold after the warm-up and gets help.
const SCENARIO: &str = "(
    name: \"report4\",
    ranks: 4,
    realisations: 800,
    base: 0.01,
    speed: [Step(at: 1.0, from_rank: 3, factor: 0.2)],
)";

/// Run the emulator; its stdout, and the run directory.
fn emulate(dir: &Path) -> (String, PathBuf) {
    let scenario = dir.join("report4.ron");
    std::fs::write(&scenario, SCENARIO).unwrap();
    let env = [("SOSLB_JOB_ID", "job"), ("SOSLB_WARMUP", "0.5")];
    let cmd = mpirun(
        4,
        &example("emulate"),
        &[scenario.to_str().unwrap(), "full"],
        dir,
        &env,
    );
    let (out, stdout, stderr) = run(cmd);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let result = stdout.lines().last().unwrap_or_default();
    assert_eq!(field(result, "missing"), Some("0"), "{result}");
    assert_eq!(field(result, "duplicates"), Some("0"), "{result}");
    (stdout, dir.join("signals/job.0"))
}

fn report(args: &[&Path]) -> (bool, String, String) {
    let out = Command::new(SOSLB)
        .arg("report")
        .args(args)
        .output()
        .expect("soslb runs");
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.success(), text(&out.stdout), text(&out.stderr))
}

/// The rows of the table: rank, own, received, given, computed.
fn rows(table: &str) -> Vec<[u64; 5]> {
    table
        .lines()
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            let rank = w.first()?.parse().ok()?;
            let n = |i: usize| w.get(i).and_then(|v| v.parse().ok());
            Some([rank, n(2)?, n(3)?, n(4)?, n(5)?])
        })
        .collect()
}

/// Width and height of a PNG file, after checking its signature.
fn png_size(path: &Path) -> (u32, u32, u64) {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert!(
        bytes.starts_with(b"\x89PNG\r\n\x1a\n"),
        "{} is not a PNG",
        path.display()
    );
    assert_eq!(&bytes[12..16], b"IHDR", "{}", path.display());
    let be = |i: usize| u32::from_be_bytes(bytes[i..i + 4].try_into().unwrap());
    (be(16), be(20), bytes.len() as u64)
}

#[test]
fn the_report_of_a_real_run_adds_up_and_draws_its_pictures() {
    let dir = temp_dir("report");
    let (stdout, job) = emulate(&dir);
    let out = dir.join("report");
    let (ok, table, stderr) = report(&[&job, Path::new("--out"), &out]);
    assert!(ok, "{table}\n{stderr}");
    assert!(!stderr.contains("warning"), "{stderr}");
    // The emulator's own count of the ids each rank computed.
    let computed: Vec<u64> = stdout
        .lines()
        .filter(|l| l.starts_with("rank:"))
        .map(|l| field(l, "computed").and_then(|v| v.parse().ok()).unwrap())
        .collect();
    let rows = rows(&table);
    assert_eq!(rows.len(), 4, "{table}");
    for [rank, own, received, given, c] in &rows {
        assert_eq!(own + received - given, *c, "rank {rank}: {table}");
        assert_eq!(
            *c, computed[*rank as usize],
            "rank {rank}: {table}\n{stdout}"
        );
    }
    let total = table.lines().find(|l| l.starts_with("total")).unwrap();
    let sums: Vec<u64> = total
        .split_whitespace()
        .skip(1)
        .map(|v| v.parse().unwrap())
        .collect();
    assert_eq!((sums[0], sums[3]), (TOTAL, TOTAL), "{table}");
    assert_eq!(sums[1], sums[2], "received = given: {table}");
    assert!(rows[3][3] > 0, "the slow rank got help: {table}");
    // Every id exactly once, from the logs.
    let run = soslb::report::Run::read(&job).unwrap();
    let mut all = IdSet::new();
    for ids in &run.computed_ids {
        all.extend(ids);
    }
    let listed: u64 = run.computed_ids.iter().map(IdSet::len).sum();
    assert_eq!((listed, all.len()), (TOTAL, TOTAL));
    assert_eq!(all, IdSet::from_range(0..TOTAL));
    // The pictures and their data.
    for name in ["ranks", "forecast", "help", "timeline"] {
        let (w, h, bytes) = png_size(&out.join(format!("{name}.png")));
        assert!(
            (400..=1200).contains(&w) && (280..=1000).contains(&h),
            "{name}: {w}x{h}"
        );
        assert!(
            (5_000..=400_000).contains(&bytes),
            "{name}.png: {bytes} bytes"
        );
        let csv = std::fs::read_to_string(out.join(format!("{name}.csv"))).unwrap();
        assert!(csv.lines().count() > 1, "{name}.csv: {csv}");
    }
    let help = std::fs::read_to_string(out.join("help.csv")).unwrap();
    let taken: u64 = help
        .lines()
        .skip(1)
        .map(|l| l.rsplit(',').next().unwrap().parse::<u64>().unwrap())
        .sum();
    assert_eq!(taken, rows[3][3], "{help}");

    // A cut log (a killed job): read to its last whole line, with a warning.
    let cut = dir.join("cut");
    std::fs::create_dir_all(&cut).unwrap();
    for e in std::fs::read_dir(job.join("log")).unwrap() {
        let p = e.unwrap().path();
        let mut text = std::fs::read(&p).unwrap();
        if p.to_string_lossy().ends_with(".3.log") {
            let lines = text.iter().filter(|&&b| b == b'\n').count();
            text.truncate(text.len() - 12);
            eprintln!("cut {} of {lines} lines", p.display());
        }
        std::fs::write(cut.join(p.file_name().unwrap()), text).unwrap();
    }
    let (ok, table, stderr) = report(&[&cut, Path::new("--out"), &dir.join("cut-report")]);
    assert!(ok, "{table}\n{stderr}");
    assert!(stderr.contains("the last line is cut"), "{stderr}");
    assert!(
        stderr.contains(".3.log:"),
        "the warning names the file: {stderr}"
    );
    assert_eq!(self::rows(&table).len(), 4, "{table}");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn two_runs_side_by_side() {
    let dir = temp_dir("report-two");
    let (_, job) = emulate(&dir);
    let out = dir.join("out");
    let (ok, table, stderr) = report(&[&job, &job, Path::new("--out"), &out]);
    assert!(ok, "{table}\n{stderr}");
    assert_eq!(rows(&table).len(), 8, "{table}");
    let (w, _, _) = png_size(&out.join("ranks.png"));
    let (w1, _, _) = png_size(&out.join("forecast.png"));
    assert!(w >= 1000 && w1 < 1000, "two panels: {w} wide");
    assert!(out.join("2/ranks.csv").is_file() || out.join("1/ranks.csv").is_file());
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn plot_draws_a_csv_and_names_a_bad_cell() {
    let dir = temp_dir("plot");
    let csv = dir.join("c.csv");
    std::fs::write(
        &csv,
        "n,balanced,static\n1000,0.1,0.2\n10000,0.03,\n100000,0.01,0.02\n",
    )
    .unwrap();
    let png = dir.join("c.png");
    let plot = |csv: &Path| {
        Command::new(SOSLB)
            .args(["plot", "--log-x", "--log-y", "--title", "t", "--out"])
            .arg(&png)
            .arg(csv)
            .output()
            .unwrap()
    };
    let out = plot(&csv);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (w, h, bytes) = png_size(&png);
    assert!(
        w > 300 && h > 200 && bytes > 3_000,
        "{w}x{h}, {bytes} bytes"
    );
    std::fs::write(&csv, "n,a\n1,2\n3,x\n").unwrap();
    let out = plot(&csv);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("c.csv:3: column `a`: \"x\" is not a number"),
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(dir);
}
