//! A reduced reproduction end to end (few runs, few epochs): run files, resumption, tables.

use std::path::Path;
use std::process::Command;

/// Runs a reduced ablation (`runs` seeds, 2 epochs) into `out` and checks it succeeded.
fn ablation(out: &Path, runs: &str) {
    let o = Command::new(env!("CARGO_BIN_EXE_aecm"))
        .args([
            "reproduce",
            "--experiment",
            "ablation",
            "--runs",
            runs,
            "--epochs",
            "2",
        ])
        .args(["--device", "cpu", "--quiet", "--out"])
        .arg(out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

#[test]
fn reduced_ablation_writes_tables_and_resumes() {
    let out = std::env::temp_dir().join(format!("aecm-repro-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    ablation(&out, "2");
    let stored = out.join("runs/gaussians5/cm-random-E1E2E3E4/seed-1.json");
    assert!(stored.is_file());
    // the record keeps the final clustering against the labels: 5 clusters x 5 classes
    let rec: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&stored).unwrap()).unwrap();
    assert_eq!(
        rec["device"], "cpu (burn flex)",
        "the record names the device that trained it"
    );
    // and, where the system says, the CPU (its L1 cache decides the products' summation order)
    let info = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    if info.contains("model name") {
        let cpu = rec["cpu"].as_str().expect("the record names the CPU");
        assert!(
            !cpu.is_empty() && info.contains(cpu.split(" (").next().unwrap()),
            "{cpu}"
        );
    }
    let counts = rec["counts"].as_array().expect("counts in the record");
    assert_eq!(counts.len(), 5);
    let total: u64 = counts
        .iter()
        .map(|row| {
            let row = row.as_array().unwrap();
            assert_eq!(row.len(), 5);
            row.iter().map(|c| c.as_u64().unwrap()).sum::<u64>()
        })
        .sum();
    assert!(total > 0);
    let before = std::fs::metadata(&stored).unwrap().modified().unwrap();
    let csv = std::fs::read_to_string(out.join("ablation.csv")).unwrap();
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(
        lines[0],
        "experiment,dataset,model,init,variant,metric,runs,mean,std,best,lsp_selected,paper"
    );
    assert_eq!(lines.len(), 1 + 9 * 3, "9 term combinations x ARI/NMI/ACC");
    let full = lines.iter().find(|l| l.contains(",E1E2E3E4,ari,")).unwrap();
    let cells: Vec<&str> = full.split(',').collect();
    assert_eq!(cells[6], "2");
    assert_eq!(cells[11], "83.3", "the paper's value beside ours");
    let mean: f64 = cells[7].parse().unwrap();
    assert!((-100.0..=100.0).contains(&mean));
    let md = std::fs::read_to_string(out.join("ablation.md")).unwrap();
    assert!(md.contains("| gaussians5 | cm | random | E1E2E3E4 | ari | 2 |"));
    // under the table, what each run did to the classes, read from the records' counts
    assert!(md.contains("<details><summary>What each run did to the classes"));
    let line = md
        .lines()
        .find(|l| l.starts_with("- gaussians5 cm-random-E1E2E3E4 seed 1 (ARI "))
        .expect("a line for seed 1");
    let (_, summary) = line.split_once("): ").expect("a summary after the ARI");
    // then its wall time and the device that trained it
    let (summary, _) = summary
        .split_once(" s on cpu (burn flex))")
        .expect("the device after the summary");
    assert!(
        [
            "one cluster per class",
            "merged: ",
            "split: ",
            "mixed: ",
            "empty: "
        ]
        .iter()
        .any(|p| summary.starts_with(p)),
        "{line}"
    );
    let tex = std::fs::read_to_string(out.join("ablation.tex")).unwrap();
    assert!(tex.starts_with("\\begin{tabular}") && tex.contains("E1E4"));
    // a second call finds every run stored and does not run it again
    ablation(&out, "2");
    assert_eq!(
        std::fs::metadata(&stored).unwrap().modified().unwrap(),
        before
    );
    // a call with more seeds runs only the new ones, and the tables cover all stored runs
    ablation(&out, "3");
    assert_eq!(
        std::fs::metadata(&stored).unwrap().modified().unwrap(),
        before
    );
    let csv = std::fs::read_to_string(out.join("ablation.csv")).unwrap();
    assert!(csv.lines().any(|l| l.contains(",E1E2E3E4,ari,3,")), "{csv}");
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn unknown_experiment_and_missing_data_dir_are_clear_errors() {
    let o = Command::new(env!("CARGO_BIN_EXE_aecm"))
        .args(["reproduce", "--experiment", "nope", "--device", "cpu"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("unknown experiment"));
    let out = std::env::temp_dir().join(format!("aecm-repro-nodir-{}", std::process::id()));
    let o = Command::new(env!("CARGO_BIN_EXE_aecm"))
        .args([
            "reproduce",
            "--experiment",
            "cm-table",
            "--runs",
            "1",
            "--device",
            "cpu",
            "--quiet",
            "--out",
        ])
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--data-dir"));
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn only_selects_groups_and_rejects_unknown_ones() {
    let out = std::env::temp_dir().join(format!("aecm-repro-only-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let run = |only: &str| {
        Command::new(env!("CARGO_BIN_EXE_aecm"))
            .args(["reproduce", "--experiment", "ablation", "--runs", "1"])
            .args([
                "--epochs", "1", "--device", "cpu", "--quiet", "--only", only,
            ])
            .arg("--out")
            .arg(&out)
            .output()
            .unwrap()
    };
    let bad = run("kmeans-kmeans++");
    assert_eq!(bad.status.code(), Some(2));
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(
        err.contains("only") && err.contains("kmeans-kmeans++") && err.contains("cm-random"),
        "{err}"
    );
    assert!(!out.join("runs").exists(), "nothing runs on a bad --only");
    let ok = run("cm-random");
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    let err = String::from_utf8_lossy(&ok.stderr);
    assert!(
        !err.contains("started"),
        "--quiet prints no progress: {err}"
    );
    assert!(
        out.join("runs/gaussians5/cm-random-E1/seed-0.json")
            .is_file()
    );
    let _ = std::fs::remove_dir_all(&out);
}

/// `--only` also takes a group with its variant (the run folder's name, e.g. one term combination
/// of the ablation or one K of the sweep), and `--list` prints every run with its status and runs
/// nothing.
#[test]
fn only_takes_variants_and_list_shows_the_plan() {
    let out = std::env::temp_dir().join(format!("aecm-repro-list-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let run = |extra: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_aecm"))
            .args(["reproduce", "--experiment", "ablation", "--runs", "2"])
            .args(["--epochs", "1", "--device", "cpu", "--quiet", "--out"])
            .arg(&out)
            .args(extra)
            .output()
            .unwrap()
    };
    let list = |extra: &[&str]| -> Vec<String> {
        let mut args = vec!["--list"];
        args.extend_from_slice(extra);
        let o = run(&args);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stdout)
            .lines()
            .map(str::to_string)
            .collect()
    };
    let before = list(&[]);
    assert_eq!(before[0], "position,dataset,group,seed,status");
    assert_eq!(before.len(), 1 + 18, "9 combinations x 2 seeds: {before:?}");
    assert!(
        before[1..].iter().all(|l| l.ends_with(",to-run")),
        "{before:?}"
    );
    assert!(!out.exists(), "--list runs and writes nothing");
    let o = run(&["--only", "cm-random-E1", "--shard", "1/2"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let dirs: Vec<String> = std::fs::read_dir(out.join("runs/gaussians5"))
        .unwrap()
        .map(|d| d.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(dirs, ["cm-random-E1"]);
    let after = list(&["--only", "cm-random-E1,cm-random-E1E2"]);
    let status = |group: &str, seed: u64| -> String {
        after
            .iter()
            .find(|l| l.contains(&format!(",{group},{seed},")))
            .unwrap_or_else(|| panic!("{group} seed {seed} in {after:?}"))
            .rsplit(',')
            .next()
            .unwrap()
            .to_string()
    };
    // E1 is the last combination: seed 0 at position 8 (shard 0/2), seed 1 at 17 (shard 1/2)
    assert_eq!(status("cm-random-E1", 1), "done");
    assert_eq!(status("cm-random-E1", 0), "to-run");
    assert_eq!(status("cm-random-E1E2", 0), "to-run");
    assert_eq!(status("cm-random-E2E3E4", 0), "not-selected");
    let sharded = list(&["--shard", "0/2"]);
    assert!(
        sharded
            .iter()
            .any(|l| l == "17,gaussians5,cm-random-E1,1,done"),
        "{sharded:?}"
    );
    assert!(sharded.iter().any(|l| l.ends_with(",other-shard")));
    let bad = run(&["--only", "cm-random-E9"]);
    assert_eq!(bad.status.code(), Some(2));
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(
        err.contains("cm-random-E9") && err.contains("cm-random-E1E2"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&out);
}

/// Without a terminal (stderr to a pipe or a log file) progress comes as plain lines: each run
/// starts, its phases, and its scores with an ETA.
#[test]
fn progress_without_a_terminal_is_plain_lines() {
    let out = std::env::temp_dir().join(format!("aecm-repro-lines-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let o = Command::new(env!("CARGO_BIN_EXE_aecm"))
        .args(["reproduce", "--experiment", "ablation", "--runs", "2"])
        .args(["--epochs", "1", "--device", "cpu", "--only", "cm-random"])
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    let runs = 2 * 9;
    assert!(
        err.contains(&format!(
            "[1/{runs}] gaussians5 cm-random-E1E2E3E4 seed 0: started"
        )),
        "{err}"
    );
    let finished: Vec<&str> = err
        .lines()
        .filter(|l| l.contains(": ARI ") && l.contains(" NMI ") && l.contains("; ETA "))
        .collect();
    assert_eq!(finished.len(), runs, "{err}");
    assert!(finished[runs - 1].starts_with(&format!("[{runs}/{runs}] ")));
    assert!(finished[runs - 1].ends_with("ETA 0s"), "{err}");
    assert!(err.contains(": train (1 epochs)"), "{err}");
    let _ = std::fs::remove_dir_all(&out);
}

/// A reduced K sweep (1 epoch) on a small file in the Pendigits layout: 16 runs, K = 5..20, the
/// table with homogeneity rows in numeric order of K, and the figure as SVG and PNG.
#[test]
fn reduced_k_sweep_writes_tables_and_figure() {
    let root = std::env::temp_dir().join(format!("aecm-ksweep-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let data = root.join("data/pendigits");
    std::fs::create_dir_all(&data).unwrap();
    // 40 rows of 16 integer features (0..100) and a label 0..9, deterministic
    let mut rows = String::new();
    for i in 0..40u32 {
        let label = i % 10;
        let feats: Vec<String> = (0..16u32)
            .map(|j| ((label * 9 + j * 7 + i * 3) % 101).to_string())
            .collect();
        rows.push_str(&format!("{},{label}\n", feats.join(",")));
    }
    std::fs::write(data.join("pendigits.tra"), &rows).unwrap();
    std::fs::write(data.join("pendigits.tes"), &rows).unwrap();
    let out = root.join("out");
    let o = Command::new(env!("CARGO_BIN_EXE_aecm"))
        .args(["reproduce", "--experiment", "k-sweep", "--runs", "1"])
        .args(["--epochs", "1", "--device", "cpu", "--quiet", "--data-dir"])
        .arg(root.join("data"))
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let csv = std::fs::read_to_string(out.join("k-sweep.csv")).unwrap();
    let ks: Vec<String> = csv
        .lines()
        .filter(|l| l.starts_with("k-sweep,pendigits,aecm,random,") && l.contains(",homogeneity,"))
        .map(|l| l.split(',').nth(4).unwrap().to_string())
        .collect();
    let want: Vec<String> = (5..=20).map(|k| format!("K{k}")).collect();
    assert_eq!(ks, want);
    let svg = std::fs::read_to_string(out.join("k-sweep.svg")).unwrap();
    assert!(svg.contains("<svg") && svg.contains("pendigits homogeneity"));
    let png = std::fs::read(out.join("k-sweep.png")).unwrap();
    assert_eq!(&png[1..4], b"PNG");
    assert!(
        std::fs::read_to_string(out.join("k-sweep.md"))
            .unwrap()
            .contains("(k-sweep.svg)")
    );
    // --tables-only writes the same tables from the stored runs and runs nothing (no data needed)
    for f in ["k-sweep.csv", "k-sweep.md", "k-sweep.svg", "k-sweep.png"] {
        std::fs::remove_file(out.join(f)).unwrap();
    }
    let o = Command::new(env!("CARGO_BIN_EXE_aecm"))
        .args(["reproduce", "--experiment", "k-sweep", "--tables-only"])
        .args(["--device", "cpu", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(
        std::fs::read_to_string(out.join("k-sweep.csv")).unwrap(),
        csv
    );
    assert!(out.join("k-sweep.svg").exists() && out.join("k-sweep.png").exists());
    let _ = std::fs::remove_dir_all(&root);
}

/// Two processes with `--shard 0/2` and `--shard 1/2` on one folder split the runs: each runs
/// only its share, the shares are disjoint and together cover every run, and the tables written
/// by the second cover all of them. A malformed share is a clear error naming the option.
#[test]
fn shards_split_the_runs_between_processes() {
    let out = std::env::temp_dir().join(format!("aecm-repro-shard-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let run = |shard: &str| {
        Command::new(env!("CARGO_BIN_EXE_aecm"))
            .args(["reproduce", "--experiment", "ablation", "--runs", "2"])
            .args(["--epochs", "1", "--device", "cpu", "--quiet", "--only"])
            .args(["cm-random", "--shard", shard, "--out"])
            .arg(&out)
            .output()
            .unwrap()
    };
    let stored = |out: &Path| -> Vec<String> {
        let mut v = Vec::new();
        for g in std::fs::read_dir(out.join("runs/gaussians5")).unwrap() {
            let g = g.unwrap().path();
            for f in std::fs::read_dir(&g).unwrap() {
                let f = f.unwrap().path();
                v.push(format!(
                    "{}/{}",
                    g.file_name().unwrap().to_string_lossy(),
                    f.file_name().unwrap().to_string_lossy()
                ));
            }
        }
        v.sort();
        v
    };
    for bad in ["2/2", "1", "a/2", "0/0"] {
        let o = run(bad);
        assert_eq!(o.status.code(), Some(2), "--shard {bad}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains("--shard") && err.contains("I/N"), "{err}");
    }
    assert!(!out.join("runs").exists(), "nothing runs on a bad --shard");
    let o = run("0/2");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let first = stored(&out);
    assert_eq!(
        first.len(),
        9,
        "half of 9 combinations x 2 seeds: {first:?}"
    );
    let o = run("1/2");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let all = stored(&out);
    assert_eq!(all.len(), 18, "{all:?}");
    assert!(first.iter().all(|f| all.contains(f)));
    let csv = std::fs::read_to_string(out.join("ablation.csv")).unwrap();
    let rows: Vec<&str> = csv.lines().filter(|l| l.contains(",ari,")).collect();
    assert_eq!(rows.len(), 9);
    assert!(rows.iter().all(|l| l.contains(",ari,2,")), "{csv}");
    let _ = std::fs::remove_dir_all(&out);
}

/// The UCI experiment on wine (compiled in: no --data-dir): AE-CM and CM with the paper's training
/// and as the tuned-lr-epochs variant, iGMM^r, each beside the appendix's value.
#[test]
fn reduced_uci_on_wine_needs_no_data_dir() {
    let out = std::env::temp_dir().join(format!("aecm-repro-wine-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let o = Command::new(env!("CARGO_BIN_EXE_aecm"))
        .args(["reproduce", "--experiment", "uci", "--datasets", "wine"])
        .args(["--runs", "1", "--epochs", "2", "--device", "cpu", "--quiet"])
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let csv = std::fs::read_to_string(out.join("uci.csv")).unwrap();
    let ari = |model: &str, variant: &str| -> Vec<String> {
        let head = format!("uci,wine,{model},random,{variant},ari,1,");
        let line = csv
            .lines()
            .find(|l| l.starts_with(&head))
            .unwrap_or_else(|| panic!("no {model} {variant} row: {csv}"));
        line.split(',').map(str::to_string).collect()
    };
    assert_eq!(ari("aecm", "")[11], "86.0");
    assert_eq!(ari("aecm", "tuned-lr-epochs")[11], "86.0");
    assert_eq!(ari("cm", "")[11], "82.0");
    assert_eq!(ari("cm", "tuned-lr-epochs")[11], "82.0");
    assert_eq!(ari("igmm", "")[11], "76.9");
    // the stored runs carry their own settings: the variant trains with its own learning rate
    let run = |group: &str| -> String {
        std::fs::read_to_string(out.join(format!("runs/wine/{group}/seed-0.json"))).unwrap()
    };
    assert!(run("aecm-random").contains("\"lr\": 0.001"));
    assert!(run("aecm-random-tuned-lr-epochs").contains("\"lr\": 0.004933"));
    // an AE-CM record also keeps k-means' clusters x classes on its embedding (3 x 3 on wine);
    // the CM's has none
    let rec: serde_json::Value = serde_json::from_str(&run("aecm-random")).unwrap();
    let km = rec["km_counts"]
        .as_array()
        .expect("km_counts in the AE-CM record");
    assert_eq!(km.len(), 3);
    let total: u64 = km
        .iter()
        .flat_map(|row| row.as_array().unwrap().iter().map(|c| c.as_u64().unwrap()))
        .sum();
    assert_eq!(total, 178, "every wine sample counted once");
    assert!(!run("cm-random").contains("km_counts"));
    let md = std::fs::read_to_string(out.join("uci.md")).unwrap();
    assert!(
        md.contains("\n  - k-means on its embedding (ARI "),
        "the Markdown lists k-means' clusters under the AE-CM run: {md}"
    );
    let _ = std::fs::remove_dir_all(&out);
}
