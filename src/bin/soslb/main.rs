//! The `soslb` command.
//!
//! - `soslb report RUN [RUN2] --out DIR`: the per-rank table of a run (a
//!   finished or running job's directory `<signal_dir>/<job_id>.<n>`) on
//!   stdout, and in DIR `ranks.png`, `forecast.png`, `help.png`,
//!   `timeline.png` with their data as CSV. A second run is drawn beside the
//!   first in `ranks.png` (and its CSV goes to DIR/2).
//! - `soslb plot CSV --out PNG`: a line plot of a CSV file, its first column
//!   against each other one (the scripts' experiments).

mod plot;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use soslb::report::Run;
use std::path::PathBuf;
use std::process::ExitCode;

/// See a soslb run: tables, pictures and CSV from its monitor logs.
#[derive(Parser)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Per-rank table on stdout; ranks.png, forecast.png, help.png,
    /// timeline.png and CSV in --out.
    Report {
        /// The run directory (<signal_dir>/<job_id>.<n>) or its log/ folder.
        run: PathBuf,
        /// A second run, drawn beside the first in ranks.png.
        other: Option<PathBuf>,
        /// Where the pictures and CSV go (created if missing).
        #[arg(long, default_value = ".")]
        out: PathBuf,
    },
    /// A line plot of a CSV file: its first column against each other one.
    Plot {
        /// The CSV file: a header line, then numbers (empty cells are skipped).
        csv: PathBuf,
        /// The PNG to write.
        #[arg(long)]
        out: PathBuf,
        /// The title.
        #[arg(long, default_value = "")]
        title: String,
        /// The x axis' label, with its unit.
        #[arg(long, default_value = "")]
        x_label: String,
        /// The y axis' label, with its unit.
        #[arg(long, default_value = "")]
        y_label: String,
        /// Logarithmic x axis.
        #[arg(long)]
        log_x: bool,
        /// Logarithmic y axis.
        #[arg(long)]
        log_y: bool,
    },
}

fn report(run: PathBuf, other: Option<PathBuf>, out: PathBuf) -> Result<(), String> {
    std::fs::create_dir_all(&out).map_err(|e| format!("{}: {e}", out.display()))?;
    let mut runs = vec![Run::read(&run)?];
    if let Some(o) = other {
        runs.push(Run::read(&o)?);
    }
    for (i, r) in runs.iter().enumerate() {
        for w in &r.warnings {
            eprintln!("soslb report: warning: {w}");
        }
        print!("{}", r.table());
        let dir = if i == 0 {
            out.clone()
        } else {
            out.join(i.to_string())
        };
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        r.write_csv(&dir)?;
    }
    plot::ranks(&runs, &out.join("ranks.png"))?;
    plot::forecast(&runs[0], &out.join("forecast.png"))?;
    plot::help(&runs[0], &out.join("help.png"))?;
    plot::timeline(&runs[0], &out.join("timeline.png"))?;
    Ok(())
}

/// The version line and, below it, the MPI library this build links
/// (`MPI_Get_library_version`, callable before `MPI_Init`): its first line
/// up to the first comma, "MPICH Version: 4.0.2", "Open MPI v4.1.4".
fn version() -> String {
    let library = mpi::environment::library_version().unwrap_or_default();
    let first = library.lines().next().unwrap_or_default();
    let first = first.split(',').next().unwrap_or_default();
    let mpi = first.split_whitespace().collect::<Vec<_>>().join(" ");
    format!("{}\nMPI: {mpi}", env!("CARGO_PKG_VERSION"))
}

fn main() -> ExitCode {
    let version: &'static str = Box::leak(version().into_boxed_str());
    let matches = Cli::command().version(version).get_matches();
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    let done = plot::register_font().and_then(|()| match cli.command {
        Command::Report { run, other, out } => report(run, other, out),
        Command::Plot {
            csv,
            out,
            title,
            x_label,
            y_label,
            log_x,
            log_y,
        } => plot::lines(&csv, &out, &title, (&x_label, &y_label), (log_x, log_y)),
    });
    match done {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("soslb: {e}");
            ExitCode::FAILURE
        }
    }
}
