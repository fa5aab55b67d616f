//! Figures built from the run's plain-data state (the same [`Figure`]s the panels draw and the
//! exports write), and the exports and saved runs, written on writer threads.

use super::*;

impl ExplorerApp {
    pub(super) fn class_names(&self) -> Vec<String> {
        self.data
            .as_ref()
            .map_or(Vec::new(), |d| d.label_names.clone())
    }

    /// Per-step (or per-epoch) loss curves as a figure.
    pub fn loss_figure(&self) -> Figure {
        let r = &self.run;
        let spe = r.steps_per_epoch.max(1) as f64;
        let mut series = Vec::new();
        for (j, name) in r.term_names.iter().enumerate() {
            let pts: Vec<[f64; 2]> = if self.settings.loss_per_step {
                downsample(
                    r.step_terms
                        .iter()
                        .filter_map(|(s, t)| {
                            t.get(j).map(|v| [(*s as f64 + 1.0) / spe, f64::from(*v)])
                        })
                        .collect(),
                    3000,
                )
            } else {
                r.epochs
                    .iter()
                    .filter_map(|e| e.terms.get(j).map(|v| [e.epoch as f64, *v]))
                    .collect()
            };
            series.push(Series {
                name: name.clone(),
                color: category_color(j),
                points: pts,
            });
        }
        let total: Vec<[f64; 2]> = if self.settings.loss_per_step {
            downsample(
                r.step_terms
                    .iter()
                    .map(|(s, t)| {
                        [
                            (*s as f64 + 1.0) / spe,
                            t.iter().map(|v| f64::from(*v)).sum(),
                        ]
                    })
                    .collect(),
                3000,
            )
        } else {
            r.epochs.iter().map(|e| [e.epoch as f64, e.loss]).collect()
        };
        if !r.term_names.is_empty() {
            series.push(Series {
                name: "total".into(),
                color: [150, 150, 150],
                points: total,
            });
        }
        let log = self.settings.log_y;
        if log {
            for s in &mut series {
                for p in &mut s.points {
                    p[1] = p[1].abs();
                }
            }
        }
        Figure::Lines {
            title: format!("Loss terms ({})", self.model_name()),
            x_label: "epoch".into(),
            y_label: if log {
                "|value|".into()
            } else {
                "value".into()
            },
            series,
            marks: self.mark_positions(),
            references: vec![],
            log_y: log,
        }
    }

    pub(super) fn mark_positions(&self) -> Vec<(f64, String)> {
        let spe = self.run.steps_per_epoch.max(1) as f64;
        self.run
            .marks
            .iter()
            .map(|m| (m.step as f64 / spe, m.text.clone()))
            .collect()
    }

    pub(super) fn model_name(&self) -> &'static str {
        self.run
            .config
            .as_ref()
            .map_or(self.settings.model, |c| c.model)
            .name()
    }

    /// The paper's values (x100) for the current preset and data set, when it has them.
    pub fn paper_reference(&self) -> Option<[f64; 3]> {
        let ds = self.data.as_ref()?;
        let key = paper_preset_for(&ds.name)?.name;
        let model = match self.settings.preset {
            AppPreset::CmPaper => "cm",
            AppPreset::AecmPaper => "aecm",
            AppPreset::Kmeans => "kmeans",
            _ => return None,
        };
        let exp = if model == "aecm" {
            "aecm-table"
        } else {
            "cm-table"
        };
        let v = |m| crate::reproduce::paper_value(exp, key, model, "random", "", m);
        Some([v("ari")?, v("nmi")?, v("acc")?])
    }

    /// Metric curves as a figure.
    pub fn metrics_figure(&self) -> Figure {
        let r = &self.run;
        let pick = |f: fn(&Scores) -> f64| -> Vec<[f64; 2]> {
            r.epochs
                .iter()
                .filter_map(|e| e.scores.as_ref().map(|s| [e.epoch as f64, 100.0 * f(s)]))
                .collect()
        };
        let series = vec![
            Series {
                name: "ARI".into(),
                color: category_color(0),
                points: pick(|s| s.ari),
            },
            Series {
                name: "NMI".into(),
                color: category_color(1),
                points: pick(|s| s.nmi),
            },
            Series {
                name: "ACC".into(),
                color: category_color(2),
                points: pick(|s| s.acc),
            },
        ];
        let mut references = Vec::new();
        if let Some(p) = self.paper_reference() {
            for (i, n) in ["ARI", "NMI", "ACC"].iter().enumerate() {
                references.push((format!("paper {n}"), p[i], category_color(i)));
            }
        }
        Figure::Lines {
            title: format!("Metrics ({}, x100)", self.model_name()),
            x_label: "epoch".into(),
            y_label: "score x100".into(),
            series,
            marks: self.mark_positions(),
            references,
            log_y: false,
        }
    }

    pub(super) fn lsp_series(&self) -> Vec<[f64; 2]> {
        self.run
            .epochs
            .iter()
            .filter_map(|e| e.lsp.map(|l| [e.epoch as f64, l]))
            .collect()
    }

    /// The points shown in the projection panel (UMAP when computed and chosen, else PCA).
    pub fn projection_points(&self) -> Option<&[[f32; 2]]> {
        if self.settings.umap
            && let Some((c, _)) = &self.run.umap
        {
            return Some(c);
        }
        self.run.snapshot.as_ref().map(|s| &s.coords[..])
    }

    pub(super) fn point_colors(&self) -> Vec<[u8; 3]> {
        let Some(s) = &self.run.snapshot else {
            return Vec::new();
        };
        let labels = self.data.as_ref().and_then(|d| d.labels.as_ref());
        match (self.settings.color_by_label, labels) {
            (true, Some(l)) => l.iter().map(|&c| category_color(c as usize)).collect(),
            _ => s
                .assignments
                .iter()
                .map(|&c| category_color(c as usize))
                .collect(),
        }
    }

    /// The projection as a figure.
    pub fn projection_figure(&self) -> Figure {
        let pts = self
            .projection_points()
            .map(<[_]>::to_vec)
            .unwrap_or_default();
        let umap = self.settings.umap && self.run.umap.is_some();
        let (centroids, trajectories) = match (&self.run.snapshot, umap) {
            (Some(s), false) => (s.centroid_coords.clone(), self.run.trajectories.clone()),
            _ => (vec![], vec![]),
        };
        let by_label = self.settings.color_by_label;
        let names = self.class_names();
        let k = self.run.snapshot.as_ref().map_or(0, |s| s.sizes.len());
        let legend: Vec<(String, [u8; 3])> = if by_label {
            names
                .iter()
                .enumerate()
                .map(|(i, n)| (n.clone(), category_color(i)))
                .collect()
        } else {
            (0..k)
                .map(|i| (format!("cluster {i}"), category_color(i)))
                .collect()
        };
        Figure::Scatter {
            title: format!(
                "{} of the {} ({}), step {}",
                if umap { "UMAP" } else { "PCA" },
                if self
                    .run
                    .snapshot
                    .as_ref()
                    .is_some_and(|s| s.embedding.is_some())
                {
                    "embedding"
                } else {
                    "data"
                },
                self.model_name(),
                self.run.steps
            ),
            points: pts,
            colors: self.point_colors(),
            centroids,
            trajectories: if self.settings.trajectories {
                trajectories
            } else {
                vec![]
            },
            legend,
        }
    }

    /// Centroids (as images for image data, else as a heat map) as a figure.
    pub fn centroids_figure(&self) -> Figure {
        let Some(s) = &self.run.snapshot else {
            return Figure::Heatmap {
                title: "Centroids".into(),
                rows: vec![],
                cols: vec![],
                values: vec![],
                annotate: false,
            };
        };
        let c = &s.centroids_input;
        if let Some(shape) = self.data.as_ref().and_then(|d| d.image_shape) {
            let (lo, hi) = self.pixel_range();
            let mut images: Vec<(String, Vec<f32>)> = (0..c.rows)
                .map(|k| {
                    (
                        format!("{k} (n={})", s.sizes.get(k).copied().unwrap_or(0)),
                        c.data[k * c.cols..(k + 1) * c.cols]
                            .iter()
                            .map(|v| (v - lo) / (hi - lo))
                            .collect(),
                    )
                })
                .collect();
            if let Some((a, b, im)) = &self.run.interpolation {
                for r in 0..im.rows {
                    images.push((
                        format!("{a}->{b} {}/{}", r, im.rows - 1),
                        im.data[r * im.cols..(r + 1) * im.cols]
                            .iter()
                            .map(|v| (v - lo) / (hi - lo))
                            .collect(),
                    ));
                }
            }
            return Figure::Images {
                title: format!("Centroids ({}), step {}", self.model_name(), s.step),
                images,
                shape,
                columns: c.rows.max(8),
            };
        }
        Figure::Heatmap {
            title: format!("Centroids ({}), step {}", self.model_name(), s.step),
            rows: (0..c.rows).map(|k| format!("{k}")).collect(),
            cols: (0..c.cols).map(|j| format!("x{j}")).collect(),
            values: c.data.iter().map(|v| f64::from(*v)).collect(),
            annotate: c.cols <= 12,
        }
    }

    /// Confusion matrix (clusters ordered by their matched class) as rows x classes, with the
    /// cluster order.
    pub fn confusion(&self) -> Option<(Vec<usize>, Vec<Vec<u64>>)> {
        let s = self.run.snapshot.as_ref()?;
        let labels = self.data.as_ref()?.labels.as_ref()?;
        let k = s.sizes.len();
        let kt = self.data.as_ref()?.n_classes();
        let m = cluster_class_counts(&s.assignments, labels, k, kt);
        let map = match_clusters(&m);
        let mut order: Vec<usize> = (0..k).collect();
        order.sort_by_key(|&c| map[c].unwrap_or(usize::MAX));
        Some((order, m))
    }

    /// Confusion matrix as a figure.
    pub fn confusion_figure(&self) -> Figure {
        let names = self.class_names();
        match self.confusion() {
            Some((order, m)) => Figure::Heatmap {
                title: format!(
                    "Clusters vs classes (Hungarian order), step {}",
                    self.run.steps
                ),
                rows: order.iter().map(|k| format!("cluster {k}")).collect(),
                cols: names,
                values: order
                    .iter()
                    .flat_map(|&k| m[k].iter().map(|&v| v as f64))
                    .collect(),
                annotate: true,
            },
            None => Figure::Heatmap {
                title: "Confusion matrix (needs labels and a snapshot)".into(),
                rows: vec![],
                cols: vec![],
                values: vec![],
                annotate: false,
            },
        }
    }

    /// The figure of a tab.
    pub fn figure(&self, tab: Tab) -> Figure {
        match tab {
            Tab::Loss => self.loss_figure(),
            Tab::Metrics => self.metrics_figure(),
            Tab::Projection => self.projection_figure(),
            Tab::Centroids => self.centroids_figure(),
            Tab::Confusion => self.confusion_figure(),
        }
    }

    /// Value range of the data (for drawing samples and centroids as images), computed once per
    /// data set in [`Self::set_data`].
    pub(super) fn pixel_range(&self) -> (f32, f32) {
        self.pixel_range
    }

    /// Writes the tab's figure as `fmt` (`png` or `svg`) into the export folder, on a writer
    /// thread; returns the path it will have.
    pub fn export_figure(&mut self, tab: Tab, fmt: &'static str) -> PathBuf {
        let fig = self.figure(tab);
        let (w, h) = (self.settings.export_w, self.settings.export_h);
        let path = Path::new(&self.settings.export_dir).join(format!(
            "aecm-{}-step{}.{fmt}",
            tab.file_stem(),
            self.run.steps
        ));
        let p2 = path.clone();
        self.spawn_writer(move || {
            let bytes = match fmt {
                "svg" => figures::render_svg(&fig, w, h).map(String::into_bytes),
                _ => figures::render_png(&fig, w, h),
            }
            .map_err(|e| format!("{}: {e}", p2.display()))?;
            atomic_write(&p2, &bytes).map_err(|e| e.to_string())?;
            Ok(p2.display().to_string())
        });
        path
    }

    pub(super) fn spawn_writer(
        &mut self,
        f: impl FnOnce() -> Result<String, String> + Send + 'static,
    ) {
        let (tx, rx) = sync_channel(1);
        let wake = self.wake();
        let r = std::thread::Builder::new()
            .name("aecm-writer".into())
            .spawn(move || {
                let _ = tx.send(JobMsg::Written(f()));
                wake();
            });
        match r {
            Ok(_) => self.writers.push(rx),
            Err(e) => self.status = format!("cannot start the writer: {e}"),
        }
    }

    /// Writes the run's data as CSV into the export folder: assignments (one row per sample),
    /// 2-D coordinates, embedding (AE-CM), centroids, history.
    pub fn export_data(&mut self) {
        let (Some(ds), Some(s)) = (self.data.clone(), self.run.snapshot.clone()) else {
            self.status = "nothing to export yet".into();
            return;
        };
        let dir = PathBuf::from(&self.settings.export_dir);
        let history = history_csv(&self.run);
        let coords = self
            .projection_points()
            .map(<[_]>::to_vec)
            .unwrap_or_default();
        let umap = self.settings.umap && self.run.umap.is_some();
        self.spawn_writer(move || {
            let err = |e: crate::AecmError| e.to_string();
            atomic_write(
                &dir.join("assignments.csv"),
                crate::export::assignments_csv(&ds, &s.assignments).as_bytes(),
            )
            .map_err(err)?;
            let mut c = String::from(if umap {
                "index,umap1,umap2\n"
            } else {
                "index,pc1,pc2\n"
            });
            for (i, p) in coords.iter().enumerate() {
                c.push_str(&format!("{i},{},{}\n", p[0], p[1]));
            }
            atomic_write(&dir.join("coords2d.csv"), c.as_bytes()).map_err(err)?;
            if let Some(e) = &s.embedding {
                atomic_write(
                    &dir.join("embedding.csv"),
                    crate::export::matrix_csv(e, "z").as_bytes(),
                )
                .map_err(err)?;
            }
            atomic_write(
                &dir.join("centroids.csv"),
                crate::export::matrix_csv(&s.centroids_input, "x").as_bytes(),
            )
            .map_err(err)?;
            atomic_write(&dir.join("history.csv"), history.as_bytes()).map_err(err)?;
            Ok(format!(
                "{}/{{assignments,coords2d,centroids,history}}.csv",
                dir.display()
            ))
        });
    }

    pub(super) fn save_run(&mut self, params: Vec<HostMat>) {
        let Some(cfg) = self.run.config.clone() else {
            self.status = "nothing to save".into();
            return;
        };
        let name = self.data.as_ref().map_or("data".into(), |d| d.name.clone());
        let run = SavedRun {
            format: 1,
            dataset: name.clone(),
            config: cfg.clone(),
            device: self.run.device.clone(),
            steps_per_epoch: self.run.steps_per_epoch,
            term_names: self.run.term_names.clone(),
            step_terms: self.run.step_terms.clone(),
            epochs: self.run.epochs.clone(),
            marks: self.run.marks.clone(),
            applied: self.run.applied,
            snapshot: self.run.snapshot.as_deref().cloned(),
            trajectories: self.run.trajectories.clone(),
            params,
        };
        let path = Path::new(&self.settings.export_dir).join(format!(
            "run-{}-{}-seed{}-step{}.aecm.json.gz",
            sanitize(&name),
            cfg.model.name(),
            cfg.seed,
            self.run.steps
        ));
        self.spawn_writer(move || {
            use std::io::Write;
            let json = serde_json::to_vec(&run).map_err(|e| e.to_string())?;
            let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            gz.write_all(&json).map_err(|e| e.to_string())?;
            let bytes = gz.finish().map_err(|e| e.to_string())?;
            atomic_write(&path, &bytes).map_err(|e| e.to_string())?;
            Ok(path.display().to_string())
        });
    }

    pub(super) fn open_run(&mut self, p: String) {
        let (tx, rx) = sync_channel(1);
        let wake = self.wake();
        let r = std::thread::Builder::new()
            .name("aecm-loader".into())
            .spawn(move || {
                let _ = tx.send(JobMsg::Run(Box::new(read_run(Path::new(&p)))));
                wake();
            });
        if r.is_ok() {
            self.writers.push(rx);
        }
    }

    pub(super) fn show_saved_run(&mut self, run: SavedRun) {
        self.worker = None;
        if self.data.as_ref().is_none_or(|d| d.name != run.dataset) {
            self.status = format!(
                "opened a run on '{}' (load that data set to see its points and images)",
                run.dataset
            );
        } else {
            self.status = format!("opened a saved run on {}", run.dataset);
        }
        let steps = run.snapshot.as_ref().map_or(0, |s| s.step);
        self.run = RunView {
            device: run.device,
            total_epochs: run.epochs.len(),
            steps_per_epoch: run.steps_per_epoch,
            term_names: run.term_names,
            step_terms: run.step_terms,
            epochs: run.epochs,
            marks: run.marks,
            trajectories: run.trajectories,
            basis_version: run.snapshot.as_ref().map_or(0, |s| s.basis_version),
            steps,
            phase: "saved run".into(),
            applied: run.applied,
            config: Some(run.config),
            inspect_only: true,
            version: 1,
            snapshot: run.snapshot.map(Arc::new),
            ..RunView::default()
        };
        self.scatter.refit();
        self.centroid_tex = None;
    }
}
