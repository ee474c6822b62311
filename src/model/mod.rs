//! The model: config, checkpoints, the tiny checkpoint generator.
