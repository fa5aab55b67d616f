//! Training: validated configuration, the synchronous [`Trainer`], plain-data events.

pub mod checkpoint;
pub mod config;
pub mod events;
pub mod trainer;

pub use checkpoint::Checkpoint;
pub use config::{CheckedConfig, Init, ModelKind, PRESETS, Preset, Seeding, TrainConfig, preset};
pub use events::{EpochRecord, Event, EventSink, RunResult};
pub use trainer::{Phase, Trainer, run_baseline};
