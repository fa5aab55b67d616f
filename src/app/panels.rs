//! The panels: `*_ui` functions draw the state and return [`Action`]s; keyboard shortcuts; the
//! scripted automation (`--train-steps`, `--screenshot`).

use super::*;

impl ExplorerApp {
    /// Estimated cost of the configured schedule, in seconds, from the FLOPs of one step and
    /// the GEMM rate measured on this machine at start-up (an estimate, shown as such).
    pub fn cost_estimate(&self) -> Option<(f64, f64)> {
        let d = self.data.as_ref()?;
        let cfg = self.settings.train_config().ok()?;
        if !cfg.model.is_neural() {
            return None;
        }
        let rate = (*self.gemm_gflops.lock().ok()?)?;
        let flops = crate::bench::flops_per_step(&cfg, d.d);
        let steps_train = d.n.div_ceil(cfg.batch.min(d.n).max(1)) * (cfg.epochs + 1);
        let steps_pre = if cfg.model == ModelKind::Aecm && cfg.init == Init::Pretrained {
            d.n.div_ceil(cfg.pretrain_batch.min(d.n).max(1))
                * (cfg.pretrain_epochs + cfg.cm_pretrain_epochs)
        } else {
            0
        };
        // the products at ~80% of the GEMM rate plus ~0.2 ms of fixed cost per step (the host
        // steps on 2 cores: AE-CM 88-108% of the probe, cm-mnist 0.41 ms; BENCHMARKS.md)
        let per_step = flops / (0.8 * rate * 1e9) + 2e-4;
        Some(((steps_train + steps_pre) as f64 * per_step, rate))
    }

    pub(super) fn eta(&self) -> Option<f64> {
        let r = &self.run;
        let busy = r.busy + r.busy_since.map_or(Duration::ZERO, |t| t.elapsed());
        let total_steps = r.total_epochs * r.steps_per_epoch;
        if r.steps < 5 || total_steps == 0 || busy.as_secs_f64() < 0.2 {
            return None;
        }
        let rate = r.steps as f64 / busy.as_secs_f64();
        Some(total_steps.saturating_sub(r.steps) as f64 / rate)
    }

    pub(super) fn controls_ui(&mut self, ui: &mut egui::Ui) -> Vec<Action> {
        let mut acts = Vec::new();
        egui::ScrollArea::vertical().show(ui, |ui| {
            ui.heading("Data");
            match &self.data {
                Some(d) => {
                    ui.label(format!(
                        "{}: {} x {}{}",
                        d.name,
                        d.n,
                        d.d,
                        if d.labels.is_some() {
                            format!(", {} classes", d.n_classes())
                        } else {
                            String::new()
                        }
                    ));
                }
                None => {
                    ui.label("no data loaded");
                }
            }
            ui.horizontal_wrapped(|ui| {
                if ui
                    .button("MNIST sample")
                    .on_hover_text("10,000 real MNIST digits (embedded)")
                    .clicked()
                {
                    acts.push(Action::LoadEmbedded);
                }
                egui::ComboBox::new("builtin", "generator")
                    .selected_text("2-D generators")
                    .show_ui(ui, |ui| {
                        for (g, _, help) in data::GENERATORS {
                            if ui.selectable_label(false, g).on_hover_text(help).clicked() {
                                acts.push(Action::LoadBuiltin(g.to_string()));
                            }
                        }
                    });
            });
            ui.horizontal(|ui| {
                if ui.button("Open file…").clicked() {
                    acts.push(Action::OpenDataDialog);
                }
                if ui
                    .button("Open folder…")
                    .on_hover_text("a benchmark folder, e.g. ../shared/data/mnist")
                    .clicked()
                {
                    acts.push(Action::OpenFolderDialog);
                }
            });
            ui.horizontal(|ui| {
                let l = ui.label("path");
                ui.add(
                    egui::TextEdit::singleline(&mut self.path_input)
                        .hint_text("file, folder or saved run")
                        .desired_width(150.0),
                )
                .labelled_by(l.id);
                if ui.button("Load").clicked() && !self.path_input.trim().is_empty() {
                    let p = self.path_input.trim().to_string();
                    if p.ends_with(".aecm.json.gz") {
                        acts.push(Action::OpenRun(p));
                    } else {
                        acts.push(Action::LoadPath(p));
                    }
                }
            });
            egui::CollapsingHeader::new("Import options (CSV)").show(ui, |ui| {
                ui.horizontal(|ui| {
                    let l = ui.label("label column");
                    ui.add(
                        egui::TextEdit::singleline(&mut self.settings.csv_label)
                            .desired_width(70.0),
                    )
                    .labelled_by(l.id)
                    .on_hover_text("auto, last, none, a 0-based index or a header name");
                });
                egui::ComboBox::from_label("header")
                    .selected_text(self.settings.csv_header.clone())
                    .show_ui(ui, |ui| {
                        for h in ["auto", "yes", "no"] {
                            ui.selectable_value(&mut self.settings.csv_header, h.to_string(), h);
                        }
                    });
                egui::ComboBox::from_label("preprocessing")
                    .selected_text(self.settings.preprocess.to_string())
                    .show_ui(ui, |ui| {
                        for p in [
                            Preprocess::None,
                            Preprocess::Scale255,
                            Preprocess::Max,
                            Preprocess::Standardize,
                            Preprocess::Minmax,
                        ] {
                            ui.selectable_value(&mut self.settings.preprocess, p, p.to_string());
                        }
                    });
                ui.small("Applies to the next file you load.");
            });
            if let Some(j) = &self.job {
                ui.horizontal(|ui| {
                    ui.spinner();
                    ui.label(&j.what);
                    if ui.button("Cancel").clicked() {
                        acts.push(Action::CancelJob);
                    }
                });
            }
            ui.separator();
            ui.heading("Model");
            let running = self.worker.is_some();
            egui::ComboBox::from_label("preset")
                .selected_text(self.settings.preset.label())
                .show_ui(ui, |ui| {
                    for p in AppPreset::ALL {
                        if ui
                            .selectable_label(self.settings.preset == p, p.label())
                            .clicked()
                        {
                            acts.push(Action::ApplyPreset(p));
                        }
                    }
                });
            ui.add_enabled_ui(!running, |ui| {
                let s = &mut self.settings;
                let before = s.clone();
                egui::ComboBox::from_label("model")
                    .selected_text(s.model.name())
                    .show_ui(ui, |ui| {
                        for m in [
                            ModelKind::Cm,
                            ModelKind::Aecm,
                            ModelKind::Kmeans,
                            ModelKind::Gmm,
                            ModelKind::Igmm,
                        ] {
                            ui.selectable_value(&mut s.model, m, m.name());
                        }
                    });
                egui::Grid::new("model-grid").num_columns(2).show(ui, |ui| {
                    let l = ui.label("K");
                    ui.add(egui::DragValue::new(&mut s.k).range(2..=100))
                        .labelled_by(l.id);
                    ui.end_row();
                    let l = ui.label("init");
                    // the baselines' seeding is the same choice: random samples or k-means++
                    let pre = if s.model.is_neural() {
                        "pretrained"
                    } else {
                        "k-means++"
                    };
                    egui::ComboBox::from_id_salt("init-combo")
                        .selected_text(match s.init {
                            Init::Random => "random",
                            Init::Pretrained => pre,
                        })
                        .show_ui(ui, |ui| {
                            ui.selectable_value(&mut s.init, Init::Random, "random");
                            ui.selectable_value(&mut s.init, Init::Pretrained, pre);
                        })
                        .response
                        .labelled_by(l.id);
                    ui.end_row();
                    let l = ui.label("seed");
                    ui.add(egui::DragValue::new(&mut s.seed)).labelled_by(l.id);
                    ui.end_row();
                    let l = ui.label("batch");
                    ui.add(egui::DragValue::new(&mut s.batch).range(1..=100_000))
                        .labelled_by(l.id);
                    ui.end_row();
                    let l = ui.label("learning rate");
                    ui.add(
                        egui::DragValue::new(&mut s.lr)
                            .speed(1e-4)
                            .range(1e-6..=1.0),
                    )
                    .labelled_by(l.id);
                    ui.end_row();
                    let l = ui.label("epochs");
                    ui.add(egui::DragValue::new(&mut s.epochs).range(1..=10_000))
                        .labelled_by(l.id);
                    ui.end_row();
                    if s.model == ModelKind::Aecm {
                        let l = ui.label("hidden");
                        ui.add(egui::TextEdit::singleline(&mut s.hidden).desired_width(100.0))
                            .labelled_by(l.id);
                        ui.end_row();
                        let l = ui.label("embedding p");
                        ui.add(egui::DragValue::new(&mut s.embed).range(1..=1000))
                            .labelled_by(l.id);
                        ui.end_row();
                        if s.init == Init::Pretrained {
                            let l = ui.label("AE pre-train epochs");
                            ui.add(egui::DragValue::new(&mut s.pretrain_epochs).range(0..=1000))
                                .labelled_by(l.id);
                            ui.end_row();
                            let l = ui.label("CM pre-train epochs");
                            ui.add(egui::DragValue::new(&mut s.cm_pretrain_epochs).range(0..=1000))
                                .labelled_by(l.id);
                            ui.end_row();
                        }
                    }
                    let l = ui.label("evaluate every");
                    ui.add(
                        egui::DragValue::new(&mut s.eval_every)
                            .range(0..=1000)
                            .suffix(" epochs"),
                    )
                    .labelled_by(l.id);
                    ui.end_row();
                    let l = ui.label("evaluation budget");
                    let mut pct = s.eval_budget * 100.0;
                    if ui
                        .add(
                            egui::DragValue::new(&mut pct)
                                .range(0.0..=90.0)
                                .suffix("% of time"),
                        )
                        .labelled_by(l.id)
                        .on_hover_text(
                            "evaluations over 0.05 s are spaced out to take at most this share \
                             of the time (0: every N epochs whatever they cost)",
                        )
                        .changed()
                    {
                        s.eval_budget = pct / 100.0;
                    }
                    ui.end_row();
                    let l = ui.label("device");
                    egui::ComboBox::from_id_salt("device")
                        .selected_text(format!("{:?}", s.device).to_lowercase())
                        .show_ui(ui, |ui| {
                            ui.selectable_value(&mut s.device, DeviceChoice::Auto, "auto");
                            ui.selectable_value(&mut s.device, DeviceChoice::Cpu, "cpu");
                            ui.selectable_value(&mut s.device, DeviceChoice::Wgpu, "wgpu");
                        })
                        .response
                        .labelled_by(l.id);
                    ui.end_row();
                });
                if *s != before
                    && s.preset != AppPreset::Custom
                    && (s.model != before.model
                        || s.batch != before.batch
                        || s.hidden != before.hidden
                        || s.epochs != before.epochs
                        || s.embed != before.embed
                        || s.init != before.init)
                {
                    s.preset = AppPreset::Custom;
                }
            });
            // both lines are always there, so that nothing below them (the Train button) moves
            // when the GEMM probe or the worker reports: a click located in one frame must hit
            // the same button in the next
            let measured = self.gemm_gflops.lock().ok().is_some_and(|g| g.is_some());
            let cost = match self.cost_estimate() {
                Some((secs, rate)) => format!(
                    "estimated cost: {} (from {rate:.0} GFLOP/s measured here)",
                    human_time(secs)
                ),
                None if !measured => "estimated cost: measuring this machine…".into(),
                None => "estimated cost: not estimated for this model".into(),
            };
            ui.label(RichText::new(cost).small());
            let device = if self.run.device.is_empty() {
                "device: chosen when training starts".to_string()
            } else {
                format!("device: {}", self.run.device)
            };
            ui.label(RichText::new(device).small());
            ui.separator();
            ui.heading("Loss weights (live)");
            let s = &mut self.settings;
            let mut send = false;
            let ra = ui.add(
                egui::Slider::new(&mut s.alpha, 0.01..=1000.0)
                    .logarithmic(true)
                    .text("alpha"),
            );
            let rb = ui.add(
                egui::Slider::new(&mut s.beta, 0.001..=1000.0)
                    .logarithmic(true)
                    .text("beta"),
            );
            let rl = ui.add(
                egui::Slider::new(&mut s.lambda, 0.001..=1000.0)
                    .logarithmic(true)
                    .text("lambda"),
            );
            for r in [ra, rb, rl] {
                if r.drag_stopped() || (r.changed() && !r.dragged()) {
                    send = true;
                }
            }
            if send {
                acts.push(Action::SendWeights);
            }
            let (a, b, l) = self.run.applied;
            // always one line (see the cost line above)
            ui.small(if self.worker.is_some() {
                format!("in the engine: alpha {a:.3}, beta {b:.3}, lambda {l:.3}")
            } else {
                "in the engine: not started".to_string()
            });
            ui.separator();
            ui.heading("Run");
            ui.horizontal(|ui| {
                if self.run.playing {
                    if ui.button("Pause").on_hover_text("space").clicked() {
                        acts.push(Action::Pause);
                    }
                } else if ui.button("Train").on_hover_text("space").clicked() {
                    acts.push(Action::Train);
                }
                if ui
                    .button("Step")
                    .on_hover_text("one mini-batch (S)")
                    .clicked()
                {
                    acts.push(Action::StepBatch);
                }
                if ui.button("Epoch").on_hover_text("one epoch (E)").clicked() {
                    acts.push(Action::StepEpoch);
                }
            });
            ui.horizontal(|ui| {
                if ui
                    .button("Reset")
                    .on_hover_text("restart with the same seed (R)")
                    .clicked()
                {
                    acts.push(Action::Reset);
                }
                if ui
                    .button("Re-seed")
                    .on_hover_text("restart with the next seed")
                    .clicked()
                {
                    acts.push(Action::Reseed);
                }
            });
            let sp = ui.add(
                egui::Slider::new(&mut self.settings.speed, 0.0..=500.0)
                    .text("max steps/s")
                    .custom_formatter(|v, _| {
                        if v == 0.0 {
                            "max".into()
                        } else {
                            format!("{v:.0}")
                        }
                    }),
            );
            if sp.drag_stopped() || (sp.changed() && !sp.dragged()) {
                acts.push(Action::SendSpeed);
            }
            let r = &self.run;
            let total = r.total_epochs * r.steps_per_epoch;
            let frac = if total > 0 {
                r.steps as f32 / total as f32
            } else {
                0.0
            };
            ui.add(egui::ProgressBar::new(frac.min(1.0)).text(format!(
                "step {} · epoch {}/{} · {}",
                r.steps,
                r.epochs.len(),
                r.total_epochs,
                if r.phase.is_empty() { "-" } else { &r.phase }
            )));
            if let Some(eta) = self.eta() {
                ui.small(format!("ETA {}", human_time(eta)));
            }
            if let Some(s) = self.run.snapshot.as_ref().and_then(|s| s.scores) {
                ui.label(format!(
                    "ARI {:.1}  NMI {:.1}  ACC {:.1}",
                    100.0 * s.ari,
                    100.0 * s.nmi,
                    100.0 * s.acc
                ));
            }
            if let Some((_, Some(km), _)) = &self.run.finished {
                ui.small(format!("AE-CM+KM: ARI {:.1}", 100.0 * km.ari));
            }
            ui.separator();
            ui.heading("Save / export");
            ui.horizontal(|ui| {
                let l = ui.label("folder");
                ui.add(
                    egui::TextEdit::singleline(&mut self.settings.export_dir).desired_width(150.0),
                )
                .labelled_by(l.id);
            });
            ui.horizontal(|ui| {
                let l = ui.label("size");
                ui.add(
                    egui::DragValue::new(&mut self.settings.export_w)
                        .range(64..=8192)
                        .suffix(" px"),
                )
                .labelled_by(l.id);
                let l = ui.label("x");
                ui.add(
                    egui::DragValue::new(&mut self.settings.export_h)
                        .range(64..=8192)
                        .suffix(" px"),
                )
                .labelled_by(l.id);
            });
            ui.horizontal(|ui| {
                if ui.button("Save run").clicked() {
                    acts.push(Action::SaveRun);
                }
                if ui.button("Export data (CSV)").clicked() {
                    acts.push(Action::ExportData);
                }
            });
            ui.separator();
            if ui.checkbox(&mut self.settings.dark, "dark theme").changed() {
                self.apply_theme();
            }
            ui.small("keys: space play/pause · S step · E epoch · R reset");
        });
        acts
    }

    pub(super) fn tab_bar_ui(&mut self, ui: &mut egui::Ui) -> Vec<Action> {
        let mut acts = Vec::new();
        ui.horizontal(|ui| {
            for t in Tab::ALL {
                ui.selectable_value(&mut self.settings.tab, t, t.label());
            }
            ui.separator();
            let tab = self.settings.tab;
            if ui
                .button("PNG")
                .on_hover_text("export this panel as PNG")
                .clicked()
            {
                acts.push(Action::ExportFigure(tab, "png"));
            }
            if ui
                .button("SVG")
                .on_hover_text("export this panel as SVG")
                .clicked()
            {
                acts.push(Action::ExportFigure(tab, "svg"));
            }
        });
        acts
    }

    pub(super) fn loss_ui(&mut self, ui: &mut egui::Ui) {
        ui.horizontal(|ui| {
            ui.checkbox(&mut self.settings.log_y, "log scale");
            ui.checkbox(&mut self.settings.loss_per_step, "per step");
            let kind = if self.run.term_names.len() == 5 {
                crate::model::NetKind::AeCm
            } else {
                crate::model::NetKind::Cm
            };
            let help = crate::model::net::term_help(kind);
            for (j, n) in self.run.term_names.iter().enumerate() {
                let c = category_color(j);
                ui.label(RichText::new(n).color(Color32::from_rgb(c[0], c[1], c[2])))
                    .on_hover_text(help.get(j).copied().unwrap_or(""));
            }
        });
        if self.run.term_names.is_empty() {
            ui.label("Press Train: the loss terms appear here, per step and per epoch.");
            return;
        }
        if self.settings.loss_per_step {
            ui.small(
                "Terms are sums over the mini-batch (as in the paper): the shorter last batch of \
                 each epoch shows as a dip.",
            );
        }
        lines_plot_ui(ui, "loss-plot", &self.loss_figure(), self.settings.log_y);
    }

    pub(super) fn metrics_ui(&mut self, ui: &mut egui::Ui) {
        let has_labels = self.data.as_ref().is_some_and(|d| d.labels.is_some());
        if !has_labels {
            ui.label("This data set has no labels: only L_sp is shown.");
        }
        let h = ui.available_height();
        if has_labels {
            ui.allocate_ui(egui::vec2(ui.available_width(), h * 0.6), |ui| {
                lines_plot_ui(ui, "metrics-plot", &self.metrics_figure(), false);
            });
        }
        let lsp = Figure::Lines {
            title: "L_sp".into(),
            x_label: "epoch".into(),
            y_label: "L_sp".into(),
            series: vec![Series {
                name: "L_sp = E2 + E3".into(),
                color: category_color(4),
                points: self.lsp_series(),
            }],
            marks: self.mark_positions(),
            references: vec![],
            log_y: false,
        };
        lines_plot_ui(ui, "lsp-plot", &lsp, false);
    }

    pub(super) fn projection_ui(&mut self, ui: &mut egui::Ui) -> Vec<Action> {
        let mut acts = Vec::new();
        ui.horizontal(|ui| {
            ui.radio_value(&mut self.settings.umap, false, "PCA (fixed basis)");
            ui.radio_value(&mut self.settings.umap, true, "UMAP");
            if ui
                .button("Compute UMAP")
                .on_hover_text("on the data (CM) or the current embedding (AE-CM)")
                .clicked()
            {
                acts.push(Action::ComputeUmap);
            }
            if ui.button("Refit PCA").clicked() {
                acts.push(Action::RefitBasis);
            }
            let has_labels = self.data.as_ref().is_some_and(|d| d.labels.is_some());
            ui.add_enabled(
                has_labels,
                egui::Checkbox::new(&mut self.settings.color_by_label, "colour by label"),
            );
            ui.checkbox(&mut self.settings.trajectories, "trajectories");
        });
        if let Some(j) = &self.job
            && j.what.starts_with("UMAP")
        {
            ui.horizontal(|ui| {
                ui.add(
                    egui::ProgressBar::new(j.progress)
                        .text(format!("{} …", j.what))
                        .desired_width(300.0),
                );
                if ui.button("Cancel").clicked() {
                    acts.push(Action::CancelJob);
                }
            });
        }
        if self.settings.umap
            && let Some((_, s)) = &self.run.umap
        {
            ui.small(format!("UMAP computed at step {s} (recompute to update)"));
        }
        if self.projection_points().is_none() {
            ui.label("Press Train (or Step) to see the data and the centroids.");
            return acts;
        }
        let version = self.run.version * 4
            + u64::from(self.settings.color_by_label) * 2
            + u64::from(self.settings.umap);
        // the view is moved out for the call so the points can be borrowed, not copied
        let mut scatter = std::mem::take(&mut self.scatter);
        let hover = {
            let points = self.projection_points().unwrap_or(&[]);
            let colors = self.point_colors();
            let umap = self.settings.umap && self.run.umap.is_some();
            let (cents, traj): (&[[f32; 2]], &[Vec<[f32; 2]>]) = match (&self.run.snapshot, umap) {
                (Some(s), false) => (
                    &s.centroid_coords,
                    if self.settings.trajectories {
                        &self.run.trajectories
                    } else {
                        &[]
                    },
                ),
                _ => (&[], &[]),
            };
            scatter.ui(
                ui,
                &ScatterData {
                    points,
                    colors: &colors,
                    centroids: cents,
                    trajectories: traj,
                    version,
                },
            )
        };
        self.scatter = scatter;
        if let Some(h) = hover {
            self.hover_ui(ui, h.index);
        }
        acts
    }

    pub(super) fn hover_ui(&mut self, ui: &mut egui::Ui, i: usize) {
        let Some(d) = self.data.clone() else { return };
        let label = d
            .labels
            .as_ref()
            .and_then(|l| l.get(i))
            .and_then(|&c| d.label_names.get(c as usize).cloned());
        let cluster = self
            .run
            .snapshot
            .as_ref()
            .and_then(|s| s.assignments.get(i).copied());
        if let Some(shape) = d.image_shape
            && self.hover_tex.as_ref().is_none_or(|(j, _)| *j != i)
        {
            let (lo, hi) = self.pixel_range();
            let img = to_color_image(d.row(i), shape, lo, hi);
            self.hover_tex = Some((
                i,
                ui.ctx()
                    .load_texture("aecm-hover", img, egui::TextureOptions::NEAREST),
            ));
        }
        let tex = self
            .hover_tex
            .as_ref()
            .filter(|(j, _)| *j == i)
            .map(|(_, t)| t.clone());
        egui::Tooltip::always_open(
            ui.ctx().clone(),
            ui.layer_id(),
            egui::Id::unique("aecm-hover-tip"),
            egui::PopupAnchor::Pointer,
        )
        .show(|ui| {
            ui.label(format!("sample {i}"));
            if let Some(l) = label {
                ui.label(format!("label {l}"));
            }
            if let Some(c) = cluster {
                ui.label(format!("cluster {c}"));
            }
            if let Some(t) = tex {
                ui.image((t.id(), egui::vec2(84.0, 84.0)));
            } else if d.d <= 8 {
                ui.label(format!("{:?}", d.row(i)));
            }
        });
    }

    pub(super) fn centroids_ui(&mut self, ui: &mut egui::Ui) -> Vec<Action> {
        let mut acts = Vec::new();
        let Some(s) = self.run.snapshot.clone() else {
            ui.label("Press Train (or Step) to see the centroids.");
            return acts;
        };
        let Some(d) = self.data.clone() else {
            return acts;
        };
        let c = &s.centroids_input;
        if let Some(shape) = d.image_shape {
            let (lo, hi) = self.pixel_range();
            if self
                .centroid_tex
                .as_ref()
                .is_none_or(|(v, _)| *v != self.run.version)
            {
                let texs = (0..c.rows)
                    .map(|k| {
                        let img =
                            to_color_image(&c.data[k * c.cols..(k + 1) * c.cols], shape, lo, hi);
                        ui.ctx().load_texture(
                            format!("aecm-centroid-{k}"),
                            img,
                            egui::TextureOptions::NEAREST,
                        )
                    })
                    .collect();
                self.centroid_tex = Some((self.run.version, texs));
            }
            ui.label(if s.embedding.is_some() {
                "Decoded centroids (through the decoder):"
            } else {
                "Centroids (in input space):"
            });
            if let Some((_, texs)) = &self.centroid_tex {
                ui.horizontal_wrapped(|ui| {
                    for (k, t) in texs.iter().enumerate() {
                        ui.vertical(|ui| {
                            ui.image((t.id(), egui::vec2(72.0, 72.0)));
                            let n = s.sizes.get(k).copied().unwrap_or(0);
                            let txt = format!("{k}: n={n}");
                            if n == 0 {
                                ui.colored_label(Color32::RED, format!("{txt} (empty)"));
                            } else {
                                ui.small(txt);
                            }
                        });
                    }
                });
            }
            ui.separator();
            ui.horizontal(|ui| {
                let k = c.rows.max(1);
                let l = ui.label("interpolate from");
                ui.add(egui::DragValue::new(&mut self.interp_pair.0).range(0..=k - 1))
                    .labelled_by(l.id);
                let l = ui.label("to");
                ui.add(egui::DragValue::new(&mut self.interp_pair.1).range(0..=k - 1))
                    .labelled_by(l.id);
                if ui
                    .add_enabled(!self.run.inspect_only, egui::Button::new("Interpolate"))
                    .clicked()
                {
                    acts.push(Action::Interpolate(self.interp_pair.0, self.interp_pair.1));
                }
                ui.small(if s.embedding.is_some() {
                    "linear in the embedding, decoded"
                } else {
                    "linear in input space"
                });
            });
            if let Some((_, _, im)) = &self.run.interpolation {
                if self.interp_tex.is_none() {
                    self.interp_tex = Some(
                        (0..im.rows)
                            .map(|r| {
                                let img = to_color_image(
                                    &im.data[r * im.cols..(r + 1) * im.cols],
                                    shape,
                                    lo,
                                    hi,
                                );
                                ui.ctx().load_texture(
                                    format!("aecm-interp-{r}"),
                                    img,
                                    egui::TextureOptions::NEAREST,
                                )
                            })
                            .collect(),
                    );
                }
                if let Some(texs) = &self.interp_tex {
                    ui.horizontal_wrapped(|ui| {
                        for t in texs {
                            ui.image((t.id(), egui::vec2(64.0, 64.0)));
                        }
                    });
                }
            }
        } else {
            ui.label("Centroids (input space):");
            egui::ScrollArea::both().show(ui, |ui| {
                egui::Grid::new("centroid-grid")
                    .striped(true)
                    .show(ui, |ui| {
                        ui.label("k");
                        ui.label("size");
                        for j in 0..c.cols.min(32) {
                            ui.label(format!("x{j}"));
                        }
                        ui.end_row();
                        for k in 0..c.rows {
                            ui.label(format!("{k}"));
                            let n = s.sizes.get(k).copied().unwrap_or(0);
                            if n == 0 {
                                ui.colored_label(Color32::RED, "0 (empty)");
                            } else {
                                ui.label(format!("{n}"));
                            }
                            for j in 0..c.cols.min(32) {
                                ui.label(format!("{:.3}", c.data[k * c.cols + j]));
                            }
                            ui.end_row();
                        }
                    });
            });
        }
        acts
    }

    pub(super) fn confusion_ui(&mut self, ui: &mut egui::Ui) {
        let Some(s) = self.run.snapshot.clone() else {
            ui.label("Press Train (or Step) first.");
            return;
        };
        let empty = s.sizes.iter().filter(|&&n| n == 0).count();
        ui.label(format!(
            "cluster sizes: {:?}{}",
            s.sizes,
            if empty > 0 {
                format!("  ({empty} empty)")
            } else {
                String::new()
            }
        ));
        let Some((order, m)) = self.confusion() else {
            ui.label("No labels: no confusion matrix.");
            return;
        };
        let names = self.class_names();
        ui.label(majority_summary(&m, &names));
        let maxv = m.iter().flatten().copied().max().unwrap_or(1).max(1) as f32;
        egui::ScrollArea::both().show(ui, |ui| {
            egui::Grid::new("confusion-grid")
                .spacing([2.0, 2.0])
                .show(ui, |ui| {
                    ui.label("cluster \\ class");
                    for n in &names {
                        ui.label(RichText::new(n).strong());
                    }
                    ui.end_row();
                    for &k in &order {
                        let size = s.sizes.get(k).copied().unwrap_or(0);
                        if size == 0 {
                            ui.colored_label(Color32::RED, format!("{k} (empty)"));
                        } else {
                            ui.label(format!("{k}"));
                        }
                        for &v in &m[k] {
                            let t = v as f32 / maxv;
                            let bg = Color32::from_rgb(
                                (255.0 * (1.0 - 0.8 * t)) as u8,
                                (255.0 * (1.0 - 0.8 * t)) as u8,
                                255,
                            );
                            egui::Frame::new()
                                .fill(bg)
                                .inner_margin(4.0)
                                .show(ui, |ui| {
                                    ui.label(RichText::new(format!("{v}")).color(Color32::BLACK));
                                });
                        }
                        ui.end_row();
                    }
                });
        });
    }

    pub(super) fn shortcuts(&self, ctx: &egui::Context) -> Vec<Action> {
        if ctx.egui_wants_keyboard_input() {
            return vec![];
        }
        let mut a = Vec::new();
        ctx.input(|i| {
            if i.key_pressed(egui::Key::Space) {
                a.push(if self.run.playing {
                    Action::Pause
                } else {
                    Action::Train
                });
            }
            if i.key_pressed(egui::Key::S) {
                a.push(Action::StepBatch);
            }
            if i.key_pressed(egui::Key::E) {
                a.push(Action::StepEpoch);
            }
            if i.key_pressed(egui::Key::R) {
                a.push(Action::Reset);
            }
            for f in &i.raw.dropped_files {
                {
                    let p = f.path();
                    if p.as_os_str().is_empty() {
                        continue;
                    }
                    let s = p.display().to_string();
                    a.push(if s.ends_with(".aecm.json.gz") {
                        Action::OpenRun(s)
                    } else {
                        Action::LoadPath(s)
                    });
                }
            }
        });
        a
    }

    pub(super) fn automation(&mut self, ctx: &egui::Context) {
        // --screenshot: train N steps, pause, wait for the snapshot, capture, save, close
        if let Some(path) = self.launch.screenshot.clone() {
            match self.screenshot_state {
                0 => {
                    if self.data.is_some() {
                        if self.launch.train_steps > 0 {
                            self.apply(Action::StepBatch);
                            self.send(Command::Steps(self.launch.train_steps));
                        }
                        self.screenshot_state = 1;
                    }
                }
                1 => {
                    let done = self.launch.train_steps == 0
                        || (self.run.steps >= self.launch.train_steps
                            && !self.run.playing
                            && self
                                .run
                                .snapshot
                                .as_ref()
                                .is_some_and(|s| s.step >= self.launch.train_steps));
                    if done || self.run.error.is_some() {
                        self.screenshot_state = 2;
                    }
                }
                2 => {
                    let slot = self.shot.clone();
                    let c2 = ctx.clone();
                    ctx.request_screenshot(move |img| {
                        if let Ok(mut s) = slot.lock() {
                            *s = Some(img);
                        }
                        c2.request_repaint();
                    });
                    self.screenshot_state = 3;
                }
                _ => {
                    let shot = self.shot.lock().ok().and_then(|mut s| s.take());
                    if let Some(img) = shot {
                        let r = save_color_image(&img, &path);
                        match r {
                            Ok(()) => eprintln!(
                                "screenshot: {} ({}x{})",
                                path.display(),
                                img.size[0],
                                img.size[1]
                            ),
                            Err(e) => eprintln!("screenshot failed: {e}"),
                        }
                        ctx.send_viewport_cmd(egui::ViewportCommand::Close);
                    }
                }
            }
            ctx.request_repaint();
        }
        // --frame-bench: train AE-CM, show the projection, record frame times
        if let Some(path) = self.launch.frame_bench.clone() {
            let now = Instant::now();
            let wanted = match &self.launch.bench_data {
                Some(_) => {
                    self.job.is_none() && self.data.as_ref().is_some_and(|d| d.name != "mnist10k")
                }
                None => self.data.is_some(),
            };
            if self.bench_started.is_none() && wanted {
                if self.launch.bench_idle {
                    // one snapshot so the projection shows its 10,000 points, no training
                    self.apply(Action::StepBatch);
                } else {
                    self.apply(Action::Train);
                }
                self.bench_started = Some(now);
            }
            if let Some(t0) = self.bench_started {
                if let Some(last) = self.last_frame
                    && t0.elapsed().as_secs_f64() > 2.0
                {
                    self.frame_times.push((now - last).as_secs_f64() * 1e3);
                }
                if t0.elapsed().as_secs_f64() > self.launch.bench_seconds.max(3.0) {
                    let v = sorted(&self.frame_times);
                    let u = sorted(&self.ui_times);
                    let q = |p: f64| quantile(&v, p);
                    let qu = |p: f64| quantile(&u, p);
                    let report = serde_json::json!({
                        "frames": v.len(),
                        "median_ms": q(0.5),
                        "p95_ms": q(0.95),
                        "max_ms": q(1.0),
                        "ui_median_ms": qu(0.5),
                        "ui_p95_ms": qu(0.95),
                        "points_shown": self.scatter.drawn,
                        "data": self.data.as_ref().map(|d| format!("{} ({} x {})", d.name, d.n, d.d)),
                        "steps": self.run.steps,
                        "model": self.model_name(),
                        "device": self.run.device,
                    });
                    eprintln!("frame bench: {report}");
                    let _ = atomic_write(&path, report.to_string().as_bytes());
                    ctx.send_viewport_cmd(egui::ViewportCommand::Close);
                }
            }
            self.last_frame = Some(now);
            ctx.request_repaint();
        }
    }
}
