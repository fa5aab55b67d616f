//! A scatter view for many points (70,000 and more): the points are rasterised into a texture
//! when the data or the view changes, centroids and trajectories are painted on top, hover finds
//! the nearest point. Scroll zooms around the pointer, drag pans, double-click fits.

use eframe::egui;
use egui::{Color32, ColorImage, Pos2, Rect, Sense, Stroke, TextureHandle, TextureOptions, Vec2};

/// What the view draws (plain data).
pub struct ScatterData<'a> {
    /// Point positions.
    pub points: &'a [[f32; 2]],
    /// Colour per point.
    pub colors: &'a [[u8; 3]],
    /// Centroids.
    pub centroids: &'a [[f32; 2]],
    /// Trajectories (one per centroid).
    pub trajectories: &'a [Vec<[f32; 2]>],
    /// Changes whenever points or colours change (cache key).
    pub version: u64,
}

/// The view's state (kept in the app between frames).
#[derive(Default)]
pub struct ScatterView {
    texture: Option<TextureHandle>,
    key: Option<(u64, [u32; 2], [u32; 4])>,
    /// Visible data rectangle (min x, min y, max x, max y); None: fit to the data.
    view: Option<[f32; 4]>,
    fitted_version: u64,
    /// Points drawn in the last frame.
    pub drawn: usize,
}

/// The sample under the pointer, if any.
pub struct Hover {
    /// Sample index.
    pub index: usize,
}

fn fit(points: &[[f32; 2]], extra: &[[f32; 2]]) -> [f32; 4] {
    let mut b = [
        f32::INFINITY,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NEG_INFINITY,
    ];
    for p in points.iter().chain(extra) {
        if p[0].is_finite() && p[1].is_finite() {
            b[0] = b[0].min(p[0]);
            b[1] = b[1].min(p[1]);
            b[2] = b[2].max(p[0]);
            b[3] = b[3].max(p[1]);
        }
    }
    if !b[0].is_finite() {
        return [-1.0, -1.0, 1.0, 1.0];
    }
    let pad_x = ((b[2] - b[0]) * 0.05).max(1e-3);
    let pad_y = ((b[3] - b[1]) * 0.05).max(1e-3);
    [b[0] - pad_x, b[1] - pad_y, b[2] + pad_x, b[3] + pad_y]
}

impl ScatterView {
    /// Forgets the zoom so the next frame fits the data.
    pub fn refit(&mut self) {
        self.view = None;
    }

    /// Shows the scatter in the available space; returns the hovered sample.
    pub fn ui(&mut self, ui: &mut egui::Ui, data: &ScatterData<'_>) -> Option<Hover> {
        let size = ui.available_size().max(Vec2::new(100.0, 100.0));
        let (rect, resp) = ui.allocate_exact_size(size, Sense::click_and_drag());
        let painter = ui.painter_at(rect);
        painter.rect_filled(rect, 2.0, ui.visuals().extreme_bg_color);
        if self.view.is_none() || data.version < self.fitted_version {
            self.view = Some(fit(data.points, data.centroids));
            self.fitted_version = data.version;
        }
        let mut v = self.view.unwrap_or([-1.0, -1.0, 1.0, 1.0]);
        // interaction
        if resp.double_clicked() {
            v = fit(data.points, data.centroids);
        }
        if resp.dragged() {
            let d = resp.drag_delta();
            let sx = (v[2] - v[0]) / rect.width();
            let sy = (v[3] - v[1]) / rect.height();
            v[0] -= d.x * sx;
            v[2] -= d.x * sx;
            v[1] += d.y * sy;
            v[3] += d.y * sy;
        }
        if resp.hovered() {
            let scroll = ui.input(|i| i.smooth_scroll_delta.y);
            if scroll != 0.0
                && let Some(p) = resp.hover_pos()
            {
                let f = (-scroll * 0.002).exp();
                let cx = v[0] + (p.x - rect.left()) / rect.width() * (v[2] - v[0]);
                let cy = v[3] - (p.y - rect.top()) / rect.height() * (v[3] - v[1]);
                v = [
                    cx + (v[0] - cx) * f,
                    cy + (v[1] - cy) * f,
                    cx + (v[2] - cx) * f,
                    cy + (v[3] - cy) * f,
                ];
            }
        }
        self.view = Some(v);
        let to_screen = |p: [f32; 2]| {
            Pos2::new(
                rect.left() + (p[0] - v[0]) / (v[2] - v[0]) * rect.width(),
                rect.bottom() - (p[1] - v[1]) / (v[3] - v[1]) * rect.height(),
            )
        };
        // rasterise the points
        let ppp = ui.ctx().pixels_per_point();
        let w = (rect.width() * ppp).round().max(1.0) as usize;
        let h = (rect.height() * ppp).round().max(1.0) as usize;
        let key = (data.version, [w as u32, h as u32], v.map(f32::to_bits));
        if self.key != Some(key) || self.texture.is_none() {
            let mut img = ColorImage::filled([w, h], Color32::TRANSPARENT);
            let r = (1.5 * ppp).max(1.0) as i64;
            for (p, c) in data.points.iter().zip(data.colors) {
                let sx = ((p[0] - v[0]) / (v[2] - v[0]) * w as f32) as i64;
                let sy = ((v[3] - p[1]) / (v[3] - v[1]) * h as f32) as i64;
                let col = Color32::from_rgb(c[0], c[1], c[2]);
                for dy in -r..r {
                    for dx in -r..r {
                        let (x, y) = (sx + dx, sy + dy);
                        if x >= 0 && y >= 0 && (x as usize) < w && (y as usize) < h {
                            img.pixels[y as usize * w + x as usize] = col;
                        }
                    }
                }
            }
            let opts = TextureOptions::NEAREST;
            match &mut self.texture {
                Some(t) => t.set(img, opts),
                None => self.texture = Some(ui.ctx().load_texture("aecm-scatter", img, opts)),
            }
            self.key = Some(key);
            self.drawn = data.points.len();
        }
        if let Some(t) = &self.texture {
            painter.image(
                t.id(),
                rect,
                Rect::from_min_max(Pos2::ZERO, Pos2::new(1.0, 1.0)),
                Color32::WHITE,
            );
        }
        let fg = ui.visuals().strong_text_color();
        for t in data.trajectories {
            let pts: Vec<Pos2> = t.iter().map(|p| to_screen(*p)).collect();
            if pts.len() > 1 {
                painter.add(egui::Shape::line(
                    pts,
                    Stroke::new(1.5, fg.gamma_multiply(0.7)),
                ));
            }
        }
        for (k, c) in data.centroids.iter().enumerate() {
            let p = to_screen(*c);
            let col = crate::figures::category_color(k);
            painter.circle(
                p,
                7.0,
                Color32::from_rgb(col[0], col[1], col[2]),
                Stroke::new(2.0, fg),
            );
            painter.text(
                p + Vec2::new(9.0, -9.0),
                egui::Align2::LEFT_BOTTOM,
                format!("{k}"),
                egui::FontId::proportional(13.0),
                fg,
            );
        }
        // hover: nearest point within 6 px
        let hp = resp.hover_pos()?;
        let mut best = (f32::INFINITY, usize::MAX);
        for (i, p) in data.points.iter().enumerate() {
            let s = to_screen(*p);
            let d = (s - hp).length_sq();
            if d < best.0 {
                best = (d, i);
            }
        }
        (best.0 < 36.0).then_some(Hover { index: best.1 })
    }
}
