//! The explorer driven through its real UI with egui_kittest (no window, no GPU): buttons are
//! clicked by label, sliders moved through accesskit, and the app's plain-data state checked.

use aecm::app::{Action, ExplorerApp, LaunchOptions, Tab};
use eframe::egui;
use egui::Role;
use egui_kittest::Harness;
use egui_kittest::kittest::Queryable;
use std::path::PathBuf;
use std::time::{Duration, Instant};

fn harness() -> Harness<'static, ExplorerApp> {
    Harness::builder()
        .with_size(egui::vec2(1280.0, 1600.0))
        .build_eframe(|cc| {
            ExplorerApp::new(
                cc,
                LaunchOptions {
                    fresh: true,
                    ..LaunchOptions::default()
                },
            )
        })
}

/// Steps the UI (as frames would) until `f` holds or `secs` pass.
fn wait_until(
    h: &mut Harness<'static, ExplorerApp>,
    secs: f64,
    f: impl Fn(&ExplorerApp) -> bool,
) -> bool {
    let t = Instant::now();
    while t.elapsed().as_secs_f64() < secs {
        h.step();
        if f(h.state()) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    false
}

/// What a failed wait shows: the status line, the worker, the run's progress.
fn state_line(a: &ExplorerApp) -> String {
    format!(
        "status '{}', worker {}, epochs {}, steps {}, playing {}, snapshot step {:?}",
        a.status,
        a.has_worker(),
        a.run.epochs.len(),
        a.run.steps,
        a.run.playing,
        a.run.snapshot.as_ref().map(|s| s.step)
    )
}

fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("aecm-app-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

#[test]
fn train_tune_pause_reset_through_the_ui() {
    let mut h = harness();
    h.step();
    let ds = h
        .state()
        .data
        .clone()
        .expect("default data loaded at start");
    assert_eq!(ds.name, "mnist10k");
    assert_eq!(ds.n, 10_000);
    assert_eq!(h.state().settings.k, 10);
    // the evaluation budget is a setting that reaches the trainer's configuration
    let budget = |h: &Harness<'static, ExplorerApp>| {
        h.state().settings.train_config().map(|c| c.eval_budget)
    };
    assert_eq!(budget(&h), Ok(0.1));
    h.state_mut().settings.eval_budget = 0.0;
    assert_eq!(budget(&h), Ok(0.0));
    h.state_mut().settings.eval_budget = 0.1;
    h.step();
    assert!(h.query_by_label("evaluation budget").is_some());

    h.get_by_label("Train").click();
    assert!(
        wait_until(&mut h, 120.0, |a| !a.run.epochs.is_empty()
            && a.run.snapshot.as_ref().is_some_and(|s| s.step > 0)),
        "no epoch within 120 s: status {}",
        h.state().status
    );
    let a = h.state();
    assert!(a.run.playing, "still training");
    assert!(!a.run.step_terms.is_empty());
    assert_eq!(a.run.term_names, ["E1", "E2", "E3", "E4"]);
    assert!(
        a.run.epochs[0].scores.is_some(),
        "metrics of the first epoch"
    );
    assert_eq!(a.projection_points().map(<[_]>::len), Some(10_000));
    match a.centroids_figure() {
        aecm::figures::Figure::Images { images, shape, .. } => {
            assert_eq!(shape, [28, 28, 1]);
            assert_eq!(images.len(), 10);
        }
        other => panic!("centroids of image data should be images, got {other:?}"),
    }
    let steps_before = a.run.step_terms.len();
    // the histories grow while it trains
    assert!(wait_until(&mut h, 60.0, |a| a.run.step_terms.len() > steps_before + 50));

    // move the alpha slider while training: the engine takes the new value and marks the step
    h.get_by_role_and_label(Role::Slider, "alpha")
        .set_value_accesskit(50.0);
    assert!(
        wait_until(&mut h, 30.0, |a| (a.run.applied.0 - 50.0).abs() < 1e-9),
        "engine did not apply alpha: {:?}",
        h.state().run.applied
    );
    let mark = h.state().run.marks.last().cloned().expect("a mark");
    assert!(mark.text.contains("alpha 50"), "{mark:?}");
    assert!(mark.step > 0);

    // pause stops the step counter
    h.get_by_label("Pause").click();
    assert!(wait_until(&mut h, 30.0, |a| !a.run.playing));
    wait_until(&mut h, 0.3, |_| false);
    let s0 = h.state().run.steps;
    wait_until(&mut h, 0.5, |_| false);
    assert_eq!(h.state().run.steps, s0, "steps moved while paused");

    // Step does exactly one mini-batch
    h.get_by_label("Step").click();
    assert!(wait_until(&mut h, 30.0, |a| a.run.steps == s0 + 1));

    // the tabs draw their panels
    for t in Tab::ALL {
        h.state_mut().settings.tab = t;
        h.step();
    }

    // reset restores step 0 with the same seed
    h.get_by_label("Reset").click();
    assert!(wait_until(&mut h, 30.0, |a| a.run.steps == 0
        && a.run.step_terms.is_empty()
        && a.run.snapshot.is_some()));
    assert!(h.state().has_worker());
}

#[test]
fn exports_and_saved_runs() {
    let mut h = harness();
    let dir = temp_dir("export");
    h.state_mut().settings.export_dir = dir.display().to_string();
    h.state_mut().settings.export_w = 640;
    h.state_mut().settings.export_h = 480;
    h.state_mut()
        .apply(Action::LoadBuiltin("gaussians5".into()));
    h.step();
    assert_eq!(h.state().data.as_ref().map(|d| d.n), Some(2000));
    assert_eq!(h.state().settings.k, 5);
    h.get_by_label("Epoch").click();
    let ok = wait_until(&mut h, 60.0, |a| {
        a.run.epochs.len() == 1
            && !a.run.playing
            && a.run.snapshot.as_ref().is_some_and(|s| s.step > 0)
    });
    assert!(ok, "first epoch: {}", state_line(h.state()));
    // a second epoch so curves have two points
    h.get_by_label("Epoch").click();
    let ok = wait_until(&mut h, 60.0, |a| a.run.epochs.len() == 2 && !a.run.playing);
    assert!(ok, "second epoch: {}", state_line(h.state()));

    for tab in [
        Tab::Loss,
        Tab::Metrics,
        Tab::Projection,
        Tab::Centroids,
        Tab::Confusion,
    ] {
        h.state_mut().settings.tab = tab;
        h.step();
        h.get_by_label("PNG").click();
        h.get_by_label("SVG").click();
        h.step();
    }
    // the confusion tab (shown last) says what the clustering did to the classes
    let (_, counts) = h.state().confusion().expect("labels and a snapshot");
    let names = h.state().data.as_ref().expect("data").label_names.clone();
    let summary = aecm::metrics::majority_summary(&counts, &names);
    assert!(h.query_by_label(&summary).is_some(), "not shown: {summary}");
    h.get_by_label("Export data (CSV)").click();
    assert!(
        wait_until(&mut h, 60.0, |a| a.written.len() >= 11),
        "written: {:?}, status {}",
        h.state().written,
        h.state().status
    );
    for tab in ["loss", "metrics", "projection", "centroids", "confusion"] {
        let steps = h.state().run.steps;
        let png = dir.join(format!("aecm-{tab}-step{steps}.png"));
        let img = image::open(&png).unwrap_or_else(|e| panic!("{}: {e}", png.display()));
        assert_eq!((img.width(), img.height()), (640, 480), "{tab}");
        let svg =
            std::fs::read_to_string(dir.join(format!("aecm-{tab}-step{steps}.svg"))).expect("svg");
        assert!(
            svg.starts_with("<svg") && svg.contains("width=\"640\""),
            "{tab}"
        );
    }
    let csv = std::fs::read_to_string(dir.join("assignments.csv")).expect("assignments");
    assert_eq!(csv.lines().count(), 2001, "header + one row per sample");
    let coords = std::fs::read_to_string(dir.join("coords2d.csv")).expect("coords");
    assert_eq!(coords.lines().count(), 2001);
    let hist = std::fs::read_to_string(dir.join("history.csv")).expect("history");
    assert_eq!(hist.lines().count(), 3);

    // save the run, open it again, inspect it without an engine
    h.get_by_label("Save run").click();
    let before = h.state().written.len();
    assert!(wait_until(&mut h, 60.0, |a| a.written.len() > before));
    let run_path = h.state().written.last().cloned().expect("run path");
    assert!(run_path.ends_with(".aecm.json.gz"), "{run_path}");
    let saved = aecm::app::read_run(std::path::Path::new(&run_path)).expect("read run");
    assert_eq!(saved.epochs.len(), 2);
    assert_eq!(saved.params.len(), 4, "CM: W_enc, b_enc, W_dec, b_dec");
    h.state_mut().apply(Action::OpenRun(run_path));
    assert!(wait_until(&mut h, 30.0, |a| a.run.inspect_only));
    assert_eq!(h.state().run.epochs.len(), 2);
    assert!(!h.state().has_worker());

    // a file that is not data: a clear error naming it
    let bad = dir.join("bad.csv");
    std::fs::write(&bad, "a,b,c,label\n1,2,3,x\n4,oops,6,y\n").expect("write");
    h.state_mut()
        .apply(Action::LoadPath(bad.display().to_string()));
    assert!(wait_until(&mut h, 30.0, |a| a.busy_job().is_none()));
    let st = h.state().status.clone();
    assert!(st.contains("bad.csv") && st.contains("line 3"), "{st}");
    assert_eq!(
        h.state().data.as_ref().map(|d| d.n),
        Some(2000),
        "the old data stays"
    );
    if std::env::var_os("AECM_KEEP_EXPORTS").is_none() {
        let _ = std::fs::remove_dir_all(&dir);
    } else {
        eprintln!("exports kept in {}", dir.display());
    }
}

/// For the baselines the init choice is their seeding: the combo offers "random" and
/// "k-means++", and the choice reaches the trainer's configuration; the k-means preset starts
/// from k-means++.
#[test]
fn baseline_seeding_follows_the_init_choice() {
    use aecm::train::{Init, ModelKind, Seeding};
    let mut h = harness();
    h.step();
    let seeding =
        |h: &Harness<'static, ExplorerApp>| h.state().settings.train_config().map(|c| c.seeding);
    h.state_mut().settings.model = ModelKind::Kmeans;
    h.state_mut().settings.init = Init::Random;
    h.step();
    assert_eq!(seeding(&h), Ok(Seeding::Random));
    h.get_by_role_and_label(Role::ComboBox, "init").click();
    h.step();
    h.step();
    h.get_by_label("k-means++").click();
    h.step();
    assert_eq!(h.state().settings.init, Init::Pretrained);
    assert_eq!(seeding(&h), Ok(Seeding::KmeansPP));
    h.state_mut().settings.init = Init::Random;
    h.state_mut()
        .settings
        .apply_preset(aecm::app::AppPreset::Kmeans, "mnist10k", 10);
    assert_eq!(seeding(&h), Ok(Seeding::KmeansPP));
}
