//! `aecm`: the clustering module (CM) and AE-CM of Boubekki et al., "Joint Optimization of an
//! Autoencoder for Clustering and Embedding" (Machine Learning, 2021), on burn.
//!
//! Layers, with data flowing one way: [`data`] (loaders, generators, preprocessing) ->
//! [`model`] (networks, losses, baselines) -> [`train`] (the synchronous trainer and its events)
//! -> [`metrics`], [`export`] -> [`cli`].

pub mod cli;
pub mod data;
pub mod device;
pub mod error;
pub mod export;
pub mod metrics;
pub mod model;
pub mod reproduce;
pub mod train;
pub mod util;

pub use error::{AecmError, Result};
