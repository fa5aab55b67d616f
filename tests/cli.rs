//! Runs the real `aecm` binary.

use std::path::PathBuf;
use std::process::Command;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_aecm"))
}

fn out_dir(tag: &str) -> PathBuf {
    let p = std::env::temp_dir().join(format!("aecm-cli-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&p);
    p
}

fn json(p: &std::path::Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

/// The arguments of `aecm train` for an AE-CM on the bundled digits (pixels / max, embedding
/// 8, CPU).
fn digits_aecm_args() -> Vec<String> {
    let data = format!("{}/sample_data/digits", env!("CARGO_MANIFEST_DIR"));
    [
        "train",
        "--data",
        &data,
        "--model",
        "aecm",
        "--preprocess",
        "max",
        "--embed",
        "8",
        "--device",
        "cpu",
    ]
    .iter()
    .map(ToString::to_string)
    .collect()
}

/// `aecm train` of an AE-CM on the bundled digits for 3 epochs, writing to `out`; `extra` adds
/// the network and weights under test.
fn aecm_on_digits(out: &std::path::Path, extra: &[&str]) -> Command {
    let mut c = bin();
    c.args(digits_aecm_args())
        .args(["--epochs", "3", "--quiet"])
        .args(extra)
        .arg("--out")
        .arg(out);
    c
}

fn run_ok(cmd: &mut Command) -> String {
    let o = cmd.output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    assert!(o.status.success(), "failed: {err}");
    err
}

#[test]
fn cm_on_five_gaussians_paper_setting_reaches_ari_080_over_three_seeds() {
    let out = out_dir("g5");
    let err = run_ok(
        bin()
            .args([
                "train",
                "--data",
                "builtin:gaussians5",
                "--model",
                "cm",
                "--alpha",
                "5",
                "--batch",
                "20",
                "--epochs",
                "150",
                "--seed",
                "0",
                "--runs",
                "3",
                "--device",
                "cpu",
                "--eval-every",
                "0",
                "--quiet",
                "--out",
            ])
            .arg(&out),
    );
    assert!(
        err.contains("device: cpu"),
        "the device choice is printed: {err}"
    );
    let s = json(&out.join("summary.json"));
    let mean = s["aggregate"]["ari"]["mean"].as_f64().unwrap();
    assert!(mean >= 0.80, "mean ARI {mean} < 0.80");
    assert_eq!(s["runs"].as_array().unwrap().len(), 3);
    assert!(s["aggregate"]["ari"]["lsp_selected"].as_f64().is_some());
    for seed in 0..3 {
        assert!(out.join(format!("seed-{seed}/assignments.csv")).is_file());
    }
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn aecm_on_an_image_sample_writes_every_output_file() {
    let out = out_dir("aecm");
    run_ok(&mut aecm_on_digits(
        &out,
        &[
            "--hidden", "64,64", "--alpha", "5", "--beta", "1", "--batch", "64",
        ],
    ));
    let s = json(&out.join("summary.json"));
    assert_eq!(s["n"], 1797);
    assert_eq!(s["d"], 64);
    assert_eq!(s["k"], 10);
    for m in ["ari", "nmi", "acc"] {
        let v = s["metrics"][m].as_f64().unwrap();
        assert!((-1.0..=1.0).contains(&v), "{m} = {v}");
    }
    assert!(s["l_sp"].as_f64().is_some());
    let hist = s["history"].as_array().unwrap();
    assert_eq!(hist.len(), 4, "3 epochs + the averaging epoch");
    for t in ["rec", "cm_rec", "sparsity", "prior", "orth"] {
        assert!(hist[0]["terms"][t].as_f64().is_some(), "term {t}");
    }
    assert!(hist[0]["metrics"]["ari"].as_f64().is_some());
    let a = std::fs::read_to_string(out.join("assignments.csv")).unwrap();
    let lines: Vec<&str> = a.lines().collect();
    assert_eq!(lines[0], "index,cluster,label");
    assert_eq!(lines.len(), 1798);
    let c = std::fs::read_to_string(out.join("centroids.csv")).unwrap();
    assert_eq!(c.lines().count(), 11);
    assert_eq!(
        c.lines().next().unwrap().split(',').count(),
        9,
        "cluster + 8 embedding dims"
    );
    let dc = std::fs::read_to_string(out.join("decoded_centroids.csv")).unwrap();
    assert_eq!(dc.lines().next().unwrap().split(',').count(), 65);
    let _ = std::fs::remove_dir_all(&out);
}

/// `--step-log` writes every mini-batch's loss terms, without changing the run: each epoch's
/// terms in `summary.json` are the mean of its steps' rows, the last step of an epoch is that
/// epoch's step count, and the run is the one trained without the log.
#[test]
fn step_log_holds_every_steps_terms_and_leaves_the_run_unchanged() {
    let (a, b) = (out_dir("steps-plain"), out_dir("steps-log"));
    let extra = ["--hidden", "64,64", "--batch", "128", "--eval-every", "0"];
    run_ok(&mut aecm_on_digits(&a, &extra));
    run_ok(aecm_on_digits(&b, &extra).arg("--step-log"));
    let (sa, sb) = (json(&a.join("summary.json")), json(&b.join("summary.json")));
    assert_eq!(sa["metrics"], sb["metrics"]);
    assert_eq!(sa["l_sp"], sb["l_sp"]);
    let hist = sb["history"].as_array().unwrap();
    let losses = |s: &serde_json::Value| -> Vec<serde_json::Value> {
        s["history"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["loss"].clone())
            .collect()
    };
    assert_eq!(losses(&sa), losses(&sb));
    assert!(!a.join("steps-seed-0.csv").exists());

    let csv = std::fs::read_to_string(b.join("steps-seed-0.csv")).unwrap();
    let mut lines = csv.lines();
    let terms = ["rec", "cm_rec", "sparsity", "prior", "orth"];
    assert_eq!(
        lines.next().unwrap(),
        format!("step,epoch,phase,loss,{}", terms.join(","))
    );
    let rows: Vec<Vec<String>> = lines
        .map(|l| l.split(',').map(String::from).collect())
        .collect();
    // 1797 digits in batches of 128: 15 steps an epoch, 3 epochs and the averaging epoch
    assert_eq!(rows.len(), 4 * 15);
    assert_eq!(hist.len(), 4);
    for (i, r) in rows.iter().enumerate() {
        assert_eq!(r.len(), 4 + terms.len());
        assert_eq!(r[0], (i + 1).to_string());
        assert_eq!(r[1], (i / 15 + 1).to_string());
        assert_eq!(r[2], if i < 45 { "train" } else { "averaging" });
    }
    for (e, h) in hist.iter().enumerate() {
        let epoch_rows = &rows[15 * e..15 * (e + 1)];
        assert_eq!(
            epoch_rows.last().unwrap()[0],
            h["steps"].as_u64().unwrap().to_string()
        );
        for (j, t) in terms.iter().enumerate() {
            let mean = epoch_rows
                .iter()
                .map(|r| f64::from(r[4 + j].parse::<f32>().unwrap()))
                .sum::<f64>()
                / 15.0;
            let want = h["terms"][t].as_f64().unwrap();
            assert!(
                (mean - want).abs() <= 1e-9 * want.abs().max(1.0),
                "epoch {} {t}: mean of steps {mean}, summary {want}",
                e + 1
            );
        }
    }

    // without --out, or for a model without steps: refused before any run, naming the option
    let o = bin()
        .args(digits_aecm_args())
        .args(["--epochs", "1", "--step-log"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains("step-log") && e.contains("--out"), "{e}");
    let c = out_dir("steps-kmeans");
    let o = bin()
        .args([
            "train",
            "--data",
            "builtin:blobs",
            "--model",
            "kmeans",
            "--step-log",
            "--out",
        ])
        .arg(&c)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains("step-log") && e.contains("kmeans"), "{e}");
    for d in [a, b, c] {
        let _ = std::fs::remove_dir_all(d);
    }
}

/// The same seed gives the same run, bit for bit, whatever the number of CPU threads: the loss
/// history, the partition and the centroids of an AE-CM run with 1 and with 3 threads are
/// identical (layers of 300 units at batch 600 take the threaded products and column sums;
/// evaluated after every epoch, whatever it costs, so that the clock does not choose the epochs).
/// Across CPU models runs are not bit-identical: the matrix products use the CPU's own vector
/// kernels (AVX2, AVX-512), whose roundings differ.
#[test]
fn a_seed_gives_the_same_run_whatever_the_thread_count() {
    let run = |threads: &str| {
        let out = out_dir(&format!("threads{threads}"));
        run_ok(
            aecm_on_digits(
                &out,
                &[
                    "--hidden",
                    "300,300",
                    "--batch",
                    "600",
                    "--seed",
                    "4",
                    // a fixed evaluation schedule: with the default time budget a loaded
                    // machine skips evaluations, and the history's metric entries follow
                    // the clock, not the seed
                    "--eval-every",
                    "1",
                    "--eval-budget",
                    "0",
                ],
            )
            .env("RAYON_NUM_THREADS", threads),
        );
        let s = json(&out.join("summary.json"));
        let files: Vec<String> = ["assignments.csv", "centroids.csv"]
            .iter()
            .map(|f| std::fs::read_to_string(out.join(f)).unwrap())
            .collect();
        let _ = std::fs::remove_dir_all(&out);
        let mut history = s["history"].clone();
        for h in history.as_array_mut().unwrap() {
            h.as_object_mut().unwrap().remove("seconds"); // wall time
        }
        (history, s["metrics"].clone(), s["l_sp"].clone(), files)
    };
    let one = run("1");
    let three = run("3");
    assert_eq!(one.0, three.0, "loss history");
    assert_eq!(one.1, three.1, "metrics");
    assert_eq!(one.2, three.2, "L_sp");
    assert!(one.3 == three.3, "assignments or centroids differ");
}

#[test]
fn baselines_run_from_the_cli() {
    let data = format!("{}/sample_data/iris/iris.csv", env!("CARGO_MANIFEST_DIR"));
    for model in ["kmeans", "gmm", "igmm"] {
        for seeding in ["kmeans++", "random"] {
            let out = out_dir(&format!("{model}-{seeding}"));
            run_ok(
                bin()
                    .args(["train", "--data", &data, "--model", model])
                    .args(["--seeding", seeding, "--preprocess", "standardize"])
                    .args(["--device", "cpu", "--quiet", "--out"])
                    .arg(&out),
            );
            let s = json(&out.join("summary.json"));
            assert_eq!(s["config"]["seeding"], seeding);
            let ari = s["metrics"]["ari"].as_f64().unwrap();
            assert!(ari > 0.4, "{model} {seeding}: ARI {ari}");
            let _ = std::fs::remove_dir_all(&out);
        }
    }
    let o = bin()
        .args([
            "train",
            "--data",
            &data,
            "--model",
            "kmeans",
            "--seeding",
            "nope",
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("expected kmeans++ or random"));
}

#[test]
fn bad_input_exits_2_with_one_clear_message() {
    let o = bin()
        .args(["train", "--data", "/no/such/file.csv"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        e.contains("/no/such/file.csv") && !e.contains("panicked"),
        "{e}"
    );

    let o = bin()
        .args(["train", "--data", "builtin:blobs", "--alpha", "-1"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains("alpha") && !e.contains("panicked"), "{e}");

    let o = bin()
        .args(["train", "--data", "builtin:blobs", "--batch", "0"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("batch"));

    let o = bin()
        .args(["train", "--data", "builtin:blobs", "--model", "nope"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
}

/// Without a terminal, `train` reports evaluated epochs as plain lines (a log file shows them).
#[test]
fn train_progress_without_a_terminal_is_plain_lines() {
    let err = run_ok(bin().args([
        "train",
        "--data",
        "builtin:gaussians5",
        "--model",
        "cm",
        "--alpha",
        "5",
        "--batch",
        "200",
        "--epochs",
        "4",
        "--eval-every",
        "2",
        "--device",
        "cpu",
    ]));
    for epoch in [2, 4] {
        let line = format!("run 1/1 seed 0: epoch {epoch}/5 train loss ");
        assert!(err.contains(&line), "no line {line:?} in {err}");
    }
    // an evaluated epoch's line: scores x100, L_sp, and what the clustering did to the classes
    let line = err
        .lines()
        .find(|l| l.starts_with("run 1/1 seed 0: epoch 2/5"))
        .unwrap_or_else(|| panic!("no epoch 2 line in {err}"));
    let ari: f64 = line
        .split(" ARI ")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no ARI in {line}"));
    assert!(ari > 1.0 && ari <= 100.0, "ARI x100 {ari} in {line}");
    for part in [" NMI ", " ACC ", " L_sp "] {
        assert!(line.contains(part), "no {part:?} in {line}");
    }
    let summary = line
        .split_once(" L_sp ")
        .and_then(|(_, r)| r.split_once(" ("))
        .map_or("", |(_, s)| s);
    assert!(
        summary.ends_with(')')
            && [
                "one cluster per class",
                "merged:",
                "split:",
                "mixed:",
                "empty:"
            ]
            .iter()
            .any(|w| summary.contains(w)),
        "no clusters summary in {line}"
    );
}

/// A long run stopped with Ctrl-C continues from its last checkpoint with `--resume` and ends
/// exactly as the same run left alone (CPU); without `--resume` its checkpoint is never
/// overwritten, and other settings cannot resume it.
#[test]
fn stopped_run_resumes_from_its_checkpoint_and_ends_as_if_never_stopped() {
    use std::io::{BufRead, BufReader};
    let args = |out: &std::path::Path| -> Vec<String> {
        let mut v = digits_aecm_args();
        v.extend(
            [
                "--hidden",
                "256,256,1024",
                "--epochs",
                "14",
                "--eval-every",
                "1",
                "--eval-budget",
                "0",
                "--checkpoint-minutes",
                "0.000001",
                "--step-log",
                "--out",
            ]
            .map(String::from),
        );
        v.push(out.display().to_string());
        v
    };
    let (a, b) = (out_dir("ck-straight"), out_dir("ck-stopped"));
    run_ok(bin().args(args(&a)));
    let ckpt = b.join("checkpoint-seed-0.safetensors");
    // B: stopped with SIGINT once epoch 3 is logged
    let mut child = bin()
        .args(args(&b))
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut log = String::new();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    for line in lines.by_ref() {
        let line = line.unwrap();
        log += &line;
        log.push('\n');
        if line.contains(": epoch 3/15 ") {
            // SAFETY: kill(2) on our own child's pid with a valid signal number
            unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
            break;
        }
    }
    for line in lines {
        log += &line.unwrap();
        log.push('\n');
    }
    assert!(child.wait().unwrap().success(), "{log}");
    let stopped = json(&b.join("summary.json"));
    assert_eq!(stopped["interrupted"], true, "{log}");
    assert!(log.contains("`--resume` continues it from"), "{log}");
    assert!(ckpt.exists());
    // without --resume the checkpoint is kept and the run refused, naming the file
    let o = bin().args(args(&b)).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(
        err.contains(&ckpt.display().to_string()) && err.contains("--resume"),
        "{err}"
    );
    // other settings cannot resume it
    let o = bin()
        .args(args(&b))
        .args(["--resume", "--alpha", "3"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(
        err.contains(&ckpt.display().to_string()) && err.contains("alpha"),
        "{err}"
    );
    // --resume continues it to the end: the same run as the one never stopped
    let err = run_ok(bin().args(args(&b)).arg("--resume"));
    assert!(
        err.contains("resuming") && err.contains("after epoch"),
        "{err}"
    );
    let (ra, rb) = (json(&a.join("summary.json")), json(&b.join("summary.json")));
    assert_eq!(rb["interrupted"], false);
    for key in ["metrics", "l_sp", "km_on_embedding"] {
        assert!(
            ra[key].is_object() || ra[key].is_number(),
            "{key}: {}",
            ra[key]
        );
        assert_eq!(ra[key], rb[key], "{key}");
    }
    let history = |r: &serde_json::Value| -> Vec<serde_json::Value> {
        r["history"].as_array().cloned().unwrap_or_default()
    };
    let losses = |r: &serde_json::Value| -> Vec<serde_json::Value> {
        history(r).iter().map(|e| e["loss"].clone()).collect()
    };
    assert_eq!(losses(&ra).len(), 15);
    assert_eq!(losses(&ra), losses(&rb));
    // the resumed run's own time counts the epochs before the stop too, not only this command's
    let epoch_s = |r: &serde_json::Value| -> f64 {
        history(r)
            .iter()
            .filter_map(|e| e["seconds"].as_f64())
            .sum()
    };
    for r in [&ra, &rb] {
        let run_s = r["run_wall_s"].as_f64().unwrap();
        assert!(run_s >= epoch_s(r), "run_wall_s {run_s} < {}", epoch_s(r));
    }
    assert_eq!(
        std::fs::read_to_string(a.join("assignments.csv")).unwrap(),
        std::fs::read_to_string(b.join("assignments.csv")).unwrap()
    );
    // the step log continues from the checkpoint: the same rows as the run never stopped
    let steps = |d: &std::path::Path| std::fs::read_to_string(d.join("steps-seed-0.csv")).unwrap();
    let last_steps = history(&ra).last().unwrap()["steps"].as_u64().unwrap() as usize;
    assert_eq!(steps(&a).lines().count(), 1 + last_steps);
    assert_eq!(steps(&a), steps(&b));
    // the finished run's checkpoint holds its final parameters: resuming it changes nothing
    let err = run_ok(bin().args(args(&b)).arg("--resume"));
    assert!(err.contains("after epoch 15"), "{err}");
    assert_eq!(json(&b.join("summary.json"))["metrics"], ra["metrics"]);
    let _ = std::fs::remove_dir_all(&a);
    let _ = std::fs::remove_dir_all(&b);
}
