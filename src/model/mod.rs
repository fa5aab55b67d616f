//! Models: the CM and AE-CM networks with their named loss terms, the optimiser, and the
//! classical baselines (k-means, iGMM, GMM).

pub mod adam;
pub mod baselines;
pub mod dense;
pub mod gpu;
pub mod linalg;
pub mod net;
pub mod skinny;

pub use net::{Arch, Forward, HostMat, LossWeights, Net, NetKind, term_help, term_names};
