//! Replays the fuzz corpora on stable: every target in
//! `protocol_tests::targets::TARGETS` runs over every file in
//! `fuzz/corpus/<target>/` and, when present, `fuzz/regressions/<target>/`.
//!
//! A missing or empty corpus directory is a failure, so the corpora keep
//! guarding the codec in a plain `cargo test`.

use std::collections::BTreeSet;
use std::fs;
use std::panic::{self, AssertUnwindSafe};
use std::path::{Path, PathBuf};

use protocol_tests::targets::{Target, TARGETS};

/// Crash reproducers in `fuzz/regressions/<target>/` whose codec fix has not
/// landed yet, as `(target, file name)`. Each is skipped (with a note on
/// stderr) until the fix lands; then delete its entry here so it guards
/// against the bug coming back. Keep the reason next to each entry.
const KNOWN_CRASHES: &[(&str, &str)] = &[];

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz")
}

/// The regular files of `dir`, sorted by name.
fn files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files
}

/// Runs `target` over each file; returns the failures, as `path: message`.
fn replay(name: &str, target: Target, files: &[PathBuf]) -> Vec<String> {
    let mut failures = Vec::new();
    for path in files {
        let file_name = path.file_name().unwrap().to_string_lossy();
        if KNOWN_CRASHES
            .iter()
            .any(|&(t, f)| t == name && f == file_name)
        {
            eprintln!("skipping known crash {}", path.display());
            continue;
        }
        let data = fs::read(path).unwrap();
        if let Err(panic) = panic::catch_unwind(AssertUnwindSafe(|| target(&data))) {
            let message = panic
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| panic.downcast_ref::<&str>().copied())
                .unwrap_or("(non-string panic)");
            failures.push(format!(
                "{}: {message}\n  input: {}",
                path.display(),
                hex(&data)
            ));
        }
    }
    failures
}

fn hex(data: &[u8]) -> String {
    data.iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn every_corpus_replays_cleanly() {
    let mut failures = Vec::new();
    let mut total = 0;
    for &(name, target) in TARGETS {
        let dir = fuzz_dir().join("corpus").join(name);
        assert!(
            dir.is_dir(),
            "corpus directory {} is missing",
            dir.display()
        );
        let corpus = files(&dir);
        assert!(
            !corpus.is_empty(),
            "corpus directory {} is empty",
            dir.display()
        );
        total += corpus.len();
        failures.extend(replay(name, target, &corpus));

        let regressions = fuzz_dir().join("regressions").join(name);
        if regressions.is_dir() {
            let files = files(&regressions);
            total += files.len();
            failures.extend(replay(name, target, &files));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {total} corpus inputs failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn known_crashes_still_exist() {
    for &(target, file) in KNOWN_CRASHES {
        let path = fuzz_dir().join("regressions").join(target).join(file);
        assert!(
            path.is_file(),
            "KNOWN_CRASHES lists {}, which does not exist",
            path.display()
        );
    }
}

#[test]
fn every_target_has_a_fuzz_binary_and_a_corpus() {
    let fuzz = fuzz_dir();
    let manifest = fs::read_to_string(fuzz.join("Cargo.toml")).unwrap();
    let names: BTreeSet<&str> = TARGETS.iter().map(|(n, _)| *n).collect();

    let binaries: BTreeSet<String> = files(&fuzz.join("fuzz_targets"))
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "rs"))
        .map(|p| p.file_stem().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        binaries.iter().map(String::as_str).collect::<BTreeSet<_>>(),
        names,
        "fuzz/fuzz_targets/*.rs and TARGETS differ"
    );

    for name in &names {
        let source =
            fs::read_to_string(fuzz.join("fuzz_targets").join(format!("{name}.rs"))).unwrap();
        assert!(
            source.contains(&format!("protocol_tests::targets::{name}(")),
            "fuzz_targets/{name}.rs does not call targets::{name}"
        );
        assert!(
            manifest.contains(&format!("name = \"{name}\""))
                && manifest.contains(&format!("path = \"fuzz_targets/{name}.rs\"")),
            "fuzz/Cargo.toml has no [[bin]] for {name}"
        );
        assert!(
            fuzz.join("corpus").join(name).is_dir(),
            "no fuzz/corpus/{name}"
        );
    }
}
