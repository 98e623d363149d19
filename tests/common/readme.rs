//! The README's example program (`pi.f90`) as a user builds it against an
//! installed prefix, and what it must print: for the install and cluster
//! tests.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Run a command that must succeed.
fn succeed(mut c: Command, what: &str) -> Output {
    let out = c
        .output()
        .unwrap_or_else(|e| panic!("{what}: cannot run {c:?}: {e}"));
    assert!(
        out.status.success(),
        "{what}: {c:?}\n{}\n--- stdout\n{}--- stderr\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// The fenced block that follows `<!-- file: NAME -->` in README.md.
pub fn block(name: &str) -> String {
    let readme = std::fs::read_to_string(super::root().join("README.md")).expect("README.md");
    let marker = format!("<!-- file: {name} -->");
    let at = readme
        .find(&marker)
        .unwrap_or_else(|| panic!("README.md has no {marker} before a code block"));
    let mut lines = readme[at + marker.len()..]
        .lines()
        .skip_while(|l| l.trim().is_empty());
    let fence = lines.next().unwrap_or_default();
    assert!(
        fence.starts_with("```"),
        "README.md: {marker} is not followed by a fenced block but by `{fence}`"
    );
    let mut text = String::new();
    for line in lines {
        if line.starts_with("```") {
            return text;
        }
        text += line;
        text.push('\n');
    }
    panic!("README.md: the block after {marker} is not closed");
}

/// `scripts/install.sh --lib <this run's libsoslb.a> PREFIX`.
pub fn install(prefix: &Path) {
    let lib = super::target_dir().join("libsoslb.a");
    assert!(
        lib.is_file(),
        "{} does not exist: build it with `cargo build --release --all-targets --features emulate` \
         (scripts/test.sh does)",
        lib.display()
    );
    let mut c = Command::new("bash");
    c.arg(super::root().join("scripts/install.sh"))
        .arg("--lib")
        .arg(&lib)
        .arg(prefix)
        .env("MPIFC", super::mpifc());
    let out = succeed(c, "scripts/install.sh");
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.contains(&prefix.display().to_string()) && said.contains("pkg-config"),
        "install.sh does not say where it installed and how to use it:\n{said}"
    );
}

/// The README's example program, written as `dir/pi.f90`; its `total`.
pub fn example_source(dir: &Path) -> u64 {
    let source = block("pi.f90");
    std::fs::write(dir.join("pi.f90"), &source).expect("write pi.f90");
    source
        .lines()
        .find_map(|l| {
            let rest = l.split_once(":: total =")?.1.trim_start();
            rest.split(|c: char| !c.is_ascii_digit())
                .next()?
                .parse()
                .ok()
        })
        .expect("the README example declares `integer(int64), parameter :: total = N`")
}

/// Install into `prefix` and build the README example in `dir` as the
/// README says: `mpif90 -o pi pi.f90 $(pkg-config --cflags --libs soslb)`
/// (with this run's MPI's Fortran compiler).
/// The program and its `total`.
pub fn build_pi(prefix: &Path, dir: &Path) -> (PathBuf, u64) {
    install(prefix);
    std::fs::create_dir_all(dir).unwrap();
    let total = example_source(dir);
    let mut c = Command::new("sh");
    c.args([
        "-c",
        "\"$MPIFC\" -o pi pi.f90 $(pkg-config --cflags --libs soslb)",
    ])
    .env("MPIFC", super::mpifc())
    .current_dir(dir)
    .env("PKG_CONFIG_PATH", prefix.join("lib/pkgconfig"));
    succeed(c, "the pkg-config build of the README example");
    (dir.join("pi"), total)
}

/// What the README example must print for `total` realisations, computed here
/// the same way: realisation k is 4 if its point of the R2 sequence falls in
/// the quarter disc, else 0; the mean, and the standard error with n − 1.
fn expected_pi(total: u64) -> (f64, f64) {
    let inside = (1..=total)
        .filter(|&k| {
            let u = (0.5 + k as f64 * 0.754_877_666_246_692_7_f64).rem_euclid(1.0);
            let v = (0.5 + k as f64 * 0.569_840_290_998_053_2_f64).rem_euclid(1.0);
            u * u + v * v <= 1.0
        })
        .count() as f64;
    let n = total as f64;
    let mean = 4.0 * inside / n;
    let var = (16.0 * inside - n * mean * mean) / (n - 1.0);
    (mean, (var / n).sqrt())
}

/// The example printed one `pi = <mean> +- <standard error>` line, with the
/// exact statistics of `total` realisations (`text` describes the run).
pub fn check_pi(stdout: &str, total: u64, text: &str) {
    let lines: Vec<&str> = stdout.lines().filter(|l| l.starts_with("pi = ")).collect();
    assert_eq!(lines.len(), 1, "not one `pi = ` line (rank 0 only): {text}");
    let words: Vec<&str> = lines[0].split_whitespace().collect();
    let number = |i: usize| -> f64 {
        words
            .get(i)
            .and_then(|w| w.parse().ok())
            .unwrap_or_else(|| panic!("no number at word {i} of `{}`: {text}", lines[0]))
    };
    assert_eq!(words.get(3), Some(&"+-"), "`{}`: {text}", lines[0]);
    let (mean, std_error) = expected_pi(total);
    assert!(
        (number(2) - mean).abs() <= 6e-7,
        "mean {} instead of {mean:.6}: {text}",
        number(2)
    );
    assert!(
        (number(4) - std_error).abs() <= 6e-7,
        "standard error {} instead of {std_error:.6}: {text}",
        number(4)
    );
    assert!(
        (mean - std::f64::consts::PI).abs() < 3.0 * std_error,
        "{mean} is not pi"
    );
}
