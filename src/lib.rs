//! `aecm`: the clustering module (CM) and AE-CM of Boubekki et al., "Joint Optimization of an
//! Autoencoder for Clustering and Embedding" (Machine Learning, 2021), on burn.
//!
//! Layers, with data flowing one way: [`data`] (loaders, generators, preprocessing) ->
//! [`model`] (networks, losses, baselines) -> [`train`] (the synchronous trainer and its events)
//! -> [`metrics`], [`projection`], [`export`], [`figures`] -> [`app`] (the egui explorer) and
//! [`cli`].

pub mod app;
pub mod bench;
pub mod cli;
pub mod data;
pub mod device;
pub mod error;
pub mod export;
pub mod figures;
pub mod metrics;
pub mod model;
pub mod projection;
pub mod reproduce;
pub mod train;
pub mod util;

pub use error::{AecmError, Result};
