//! Installing soslb and using it as a Fortran programmer does: the README's
//! example program, extracted from README.md as it stands, built against a
//! prefix made by `scripts/install.sh` (from the static library of this test
//! run) with pkg-config and with CMake's `find_package(soslb)`, then run under
//! mpirun. Also: the README's configuration sample and `SOSLB_*` examples
//! parse, and `scripts/setup.sh` is not fooled by libclang-cpp and says what
//! to install where it cannot install.

mod common;

use common::readme::{self, block as readme_block, example_source, install};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A test's directory (prefix, build, signal files), removed unless the test fails.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        Scratch(common::temp_dir(&format!("install-{name}")))
    }

    fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// Run a command to completion; its output, with a description for assertions.
fn output(mut c: Command, what: &str) -> (Output, String) {
    let out = c
        .output()
        .unwrap_or_else(|e| panic!("{what}: cannot run {c:?}: {e}"));
    let text = format!(
        "{what}: {c:?}\n{}\n--- stdout\n{}--- stderr\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out, text)
}

/// Run a command that must succeed.
fn succeed(c: Command, what: &str) -> Output {
    let (out, text) = output(c, what);
    assert!(out.status.success(), "{text}");
    out
}

/// Run the example on `np` ranks and check what it printed: the exact
/// statistics, exit code 0, and a monitor log per rank left behind.
fn run_example(program: &Path, np: usize, total: u64, scratch: &Scratch, how: &str) {
    let signals = scratch.path(&format!("run-{how}"));
    let (out, text) = output(
        common::mpirun(np, program, &[], &signals, &[]),
        &format!("mpirun -np {np} of the README example built with {how}"),
    );
    assert!(out.status.success(), "{text}");
    readme::check_pi(&String::from_utf8_lossy(&out.stdout), total, &text);
    // The run leaves the monitor logs <signal_dir>/<run>/log/<host>.<rank>.log.
    let mut logs = Vec::new();
    let mut dirs = vec![signals.join("signals")];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.parent().and_then(Path::file_name) == Some("log".as_ref()) {
                logs.push(p.file_name().unwrap().to_string_lossy().into_owned());
            }
        }
    }
    for r in 0..np {
        assert!(
            logs.iter().any(|l| l.ends_with(&format!(".{r}.log"))),
            "no monitor log of rank {r} under {}: {logs:?}",
            signals.display()
        );
    }
}

#[test]
fn install_makes_a_lean_complete_prefix() {
    let scratch = Scratch::new("prefix");
    let prefix = scratch.path("prefix");
    install(&prefix);
    for f in [
        "lib/libsoslb.a",
        "include/soslb.h",
        "include/soslb.mod",
        "lib/pkgconfig/soslb.pc",
        "lib/cmake/soslb/soslbConfig.cmake",
        "lib/cmake/soslb/soslbConfigVersion.cmake",
        "share/soslb/soslb.f90",
    ] {
        assert!(prefix.join(f).is_file(), "install.sh made no {f}");
    }
    let lib = prefix.join("lib/libsoslb.a");
    let mut ar = Command::new("ar");
    ar.arg("t").arg(&lib);
    let members = String::from_utf8_lossy(&succeed(ar, "ar t").stdout).into_owned();
    assert!(
        members.lines().any(|m| m == "soslb_fortran.o"),
        "the Fortran module's object is not in the archive"
    );
    let mut nm = Command::new("nm");
    nm.arg(&lib);
    let symbols = String::from_utf8_lossy(&succeed(nm, "nm").stdout).into_owned();
    for s in [" T soslb_init", " T soslb_next", " T __soslb_MOD_"] {
        assert!(
            symbols.contains(s),
            "no symbol `{s}` in the installed archive"
        );
    }
    // Lean: no debug information and no LLVM bitcode (cargo's archive has both).
    let size = std::fs::metadata(&lib).unwrap().len();
    assert!(size < 20_000_000, "the installed archive has {size} bytes");
    let mut readelf = Command::new("readelf");
    readelf.args(["-S", "-W"]).arg(&lib);
    let sections = String::from_utf8_lossy(&succeed(readelf, "readelf -S").stdout).into_owned();
    for s in [".debug_info", ".debug_line", ".llvmbc"] {
        assert!(
            !sections.contains(s),
            "the installed archive has {s} sections"
        );
    }
    // pkg-config finds it, with absolute paths into the prefix.
    let pkg_config = |what: &str| {
        let mut c = Command::new("pkg-config");
        c.args([what, "soslb"])
            .env("PKG_CONFIG_PATH", prefix.join("lib/pkgconfig"));
        String::from_utf8_lossy(&succeed(c, "pkg-config").stdout)
            .trim()
            .to_string()
    };
    let p = prefix.display();
    assert_eq!(pkg_config("--cflags"), format!("-I{p}/include"));
    let libs = pkg_config("--libs");
    assert!(
        libs.starts_with(&format!("-L{p}/lib -lsoslb ")),
        "pkg-config --libs: {libs}"
    );
    assert_eq!(pkg_config("--modversion"), env!("CARGO_PKG_VERSION"));
    // The MPI it was built with, as the library itself says.
    let family = match common::mpi() {
        common::Mpi::OpenMpi => ("openmpi", "Open MPI v"),
        common::Mpi::Mpich => ("mpich", "MPICH Version: "),
    };
    assert_eq!(pkg_config("--variable=mpi_family"), family.0);
    let mpi = pkg_config("--variable=mpi");
    assert!(
        mpi.starts_with(family.1),
        "pkg-config --variable=mpi: {mpi}"
    );
    let cmake = std::fs::read_to_string(prefix.join("lib/cmake/soslb/soslbConfig.cmake")).unwrap();
    assert!(
        cmake.contains(&format!("set(soslb_MPI \"{mpi}\")")),
        "the CMake package does not record {mpi}"
    );
}

#[test]
fn install_refuses_a_prefix_built_with_the_other_mpi() {
    let scratch = Scratch::new("other-mpi");
    let prefix = scratch.path("prefix");
    install(&prefix);
    let pc = prefix.join("lib/pkgconfig/soslb.pc");
    let text = std::fs::read_to_string(&pc).unwrap();
    let other = match common::mpi() {
        common::Mpi::OpenMpi => "MPICH Version: 4.0.2",
        common::Mpi::Mpich => "Open MPI v4.1.4",
    };
    let mine = text
        .lines()
        .find_map(|l| l.strip_prefix("mpi="))
        .unwrap()
        .to_string();
    std::fs::write(
        &pc,
        text.replace(&format!("mpi={mine}"), &format!("mpi={other}")),
    )
    .unwrap();
    let mut c = Command::new("bash");
    c.arg(common::root().join("scripts/install.sh"))
        .arg("--lib")
        .arg(common::target_dir().join("libsoslb.a"))
        .arg(&prefix)
        .env("MPIFC", common::mpifc());
    let (out, text) = output(c, "install.sh over a prefix of the other MPI");
    assert!(!out.status.success(), "{text}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    for w in [other, mine.as_str(), "another prefix"] {
        assert!(stderr.contains(w), "no `{w}` in the message: {text}");
    }
}

#[test]
fn readme_example_builds_with_pkg_config_and_runs() {
    let scratch = Scratch::new("pkg-config");
    let (program, total) = readme::build_pi(&scratch.path("prefix"), &scratch.path("pkg-config"));
    run_example(&program, 3, total, &scratch, "pkg-config");
}

#[test]
fn readme_example_builds_with_cmake_and_runs() {
    let scratch = Scratch::new("cmake");
    let prefix = scratch.path("prefix");
    install(&prefix);
    let dir = scratch.path("cmake");
    std::fs::create_dir_all(&dir).unwrap();
    let total = example_source(&dir);
    std::fs::write(dir.join("CMakeLists.txt"), readme_block("CMakeLists.txt")).unwrap();
    let build = dir.join("build");
    let mut configure = Command::new("cmake");
    configure
        .arg("-S")
        .arg(&dir)
        .arg("-B")
        .arg(&build)
        .arg(format!("-DCMAKE_PREFIX_PATH={}", prefix.display()))
        .arg(format!("-DMPI_Fortran_COMPILER={}", common::mpifc()))
        .env_remove("CMAKE_PREFIX_PATH");
    succeed(configure, "cmake configure of the README's CMakeLists.txt");
    let mut make = Command::new("cmake");
    make.arg("--build").arg(&build);
    succeed(make, "cmake --build of the README example");
    run_example(&build.join("pi"), 2, total, &scratch, "cmake");
}

#[test]
fn cmake_refuses_a_project_that_found_the_other_mpi() {
    // The other MPI's Fortran wrapper (test.sh installs both).
    let other = match common::mpi() {
        common::Mpi::OpenMpi => "mpif90.mpich",
        common::Mpi::Mpich => "mpif90.openmpi",
    };
    let found = Command::new("sh")
        .args(["-c", &format!("command -v {other}")])
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        let why = format!("no {other}: install the other MPI (scripts/test.sh does)");
        assert!(std::env::var("CI").as_deref() != Ok("true"), "{why}");
        eprintln!("SKIPPED: {why}");
        return;
    }
    let scratch = Scratch::new("cmake-other");
    let prefix = scratch.path("prefix");
    install(&prefix);
    let dir = scratch.path("cmake");
    std::fs::create_dir_all(&dir).unwrap();
    example_source(&dir);
    std::fs::write(dir.join("CMakeLists.txt"), readme_block("CMakeLists.txt")).unwrap();
    let mut configure = Command::new("cmake");
    configure
        .arg("-S")
        .arg(&dir)
        .arg("-B")
        .arg(dir.join("build"))
        .arg(format!("-DCMAKE_PREFIX_PATH={}", prefix.display()))
        .arg(format!("-DMPI_Fortran_COMPILER={other}"))
        .env_remove("CMAKE_PREFIX_PATH");
    let (out, text) = output(configure, "cmake configure with the other MPI");
    assert!(!out.status.success(), "{text}");
    for w in [
        "was built with",
        "found another MPI",
        "MPI_Fortran_COMPILER",
    ] {
        assert!(text.contains(w), "no `{w}` in the message: {text}");
    }
}

#[test]
fn readme_example_stops_on_an_error_with_the_message() {
    let scratch = Scratch::new("error");
    let (program, _) = readme::build_pi(&scratch.path("prefix"), &scratch.path("pkg-config"));
    for (env, words) in [
        (
            ("SOSLB_MODE", "Fast"),
            ["soslb_init failed", "ierr=2", "SOSLB_MODE"],
        ),
        (
            ("SOSLB_CONFIG", "/nonexistent/soslb.ron"),
            ["soslb_init failed", "ierr=2", "/nonexistent/soslb.ron"],
        ),
    ] {
        let run = scratch.path(&format!("run-{}", env.0));
        let (out, text) = output(
            common::mpirun(2, &program, &[], &run, &[env]),
            &format!("the README example with {}={}", env.0, env.1),
        );
        assert!(!out.status.success(), "exit code 0 after an error: {text}");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(!stdout.contains("pi = "), "statistics printed: {text}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        for w in words {
            assert!(stderr.contains(w), "no `{w}` on stderr: {text}");
        }
    }
}

#[test]
fn readme_configuration_sample_and_environment_examples_parse() {
    use soslb::config::{Config, Mode};
    let scratch = Scratch::new("config");
    let file = scratch.path("soslb.ron");
    std::fs::write(&file, readme_block("soslb.ron")).unwrap();
    let config = Config::from_file(&file)
        .unwrap_or_else(|e| panic!("the README's soslb.ron does not parse: {e}"));
    assert_ne!(config, Config::default(), "the sample sets nothing");

    let exports = readme_block("environment.sh");
    let vars: Vec<(String, String)> = exports
        .lines()
        .filter_map(|l| l.trim().strip_prefix("export "))
        .map(|l| {
            let (k, v) = l.split_once('=').expect("export NAME=VALUE");
            let v = v.split(" #").next().unwrap().trim();
            let v = v
                .strip_prefix('\'')
                .and_then(|v| v.strip_suffix('\''))
                .unwrap_or(v);
            (k.to_string(), v.to_string())
        })
        .collect();
    assert!(vars.len() >= 3, "too few examples: {vars:?}");
    for (k, v) in &vars {
        let mut c = Config::default();
        c.apply_env([(k.clone(), v.clone())])
            .unwrap_or_else(|e| panic!("the README's {k}={v} does not parse: {e}"));
        assert!(
            c != Config::default() || (k == "SOSLB_MODE" && v == "Full"),
            "{k}={v} changed nothing"
        );
    }
    let mut c = Config::default();
    c.apply_env(vars).unwrap();
    assert_ne!(c.mode, Mode::Full, "the examples should show SOSLB_MODE");
}

/// `bash -c SCRIPT` after sourcing scripts/setup.sh with its checks off.
fn setup_shell(script: &str, path: Option<&Path>) -> (Output, String) {
    let mut c = Command::new("bash");
    c.arg("-c")
        .arg(format!(". scripts/setup.sh\n{script}"))
        .current_dir(common::root())
        .env("SOSLB_SETUP", "0")
        .env_remove("LIBCLANG_PATH");
    if let Some(p) = path {
        c.env("PATH", p);
    }
    output(c, script)
}

#[test]
fn setup_is_not_fooled_by_libclang_cpp() {
    let scratch = Scratch::new("libclang");
    let dir = scratch.path("lib");
    std::fs::create_dir_all(&dir).unwrap();
    let check = |what: &str, expect: bool| {
        let (out, text) = setup_shell(
            &format!(
                "LIBCLANG_PATH='{}' have_libclang && echo \"found $LIBCLANG_FOUND\"",
                dir.display()
            ),
            None,
        );
        assert_eq!(out.status.success(), expect, "{what}: {text}");
    };
    // What Debian ships without libclang-dev: the C++ library, not libclang.
    std::fs::write(dir.join("libclang-cpp.so.14"), "").unwrap();
    check("libclang-cpp only", false);
    // A link left by a removed package.
    std::os::unix::fs::symlink(dir.join("libclang-14.so.1"), dir.join("libclang.so")).unwrap();
    check("a dangling libclang.so", false);
    // The library bindgen loads.
    std::fs::write(dir.join("libclang-14.so.1"), "").unwrap();
    check("libclang-14.so.1", true);
}

#[test]
fn setup_says_what_to_install_without_apt_get() {
    // A PATH with the few tools setup.sh uses, and no apt-get.
    let scratch = Scratch::new("no-apt");
    let bin = scratch.path("bin");
    std::fs::create_dir_all(&bin).unwrap();
    for tool in ["bash", "dirname", "id", "cat"] {
        let (out, _) = output(
            {
                let mut c = Command::new("sh");
                c.args(["-c", &format!("command -v {tool}")]);
                c
            },
            tool,
        );
        let path = String::from_utf8_lossy(&out.stdout).trim().to_string();
        assert!(out.status.success(), "no {tool}");
        std::os::unix::fs::symlink(path, bin.join(tool)).unwrap();
    }
    let (out, text) = setup_shell(
        "SOSLB_SETUP=1; need_commands soslb-no-such-command=soslb-no-such-package",
        Some(&bin),
    );
    assert_eq!(out.status.code(), Some(1), "{text}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    for w in [
        "apt-get is not available",
        "the command soslb-no-such-command (Debian package soslb-no-such-package)",
        "apt-get install soslb-no-such-package",
        "dnf install clang-devel",
        "LIBCLANG_PATH",
        "MPI_PKG_CONFIG",
        "MPICC",
    ] {
        assert!(stderr.contains(w), "no `{w}` in the message: {text}");
    }
}
