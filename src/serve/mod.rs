//! Serving on one engine: jobs, lanes and rounds, the prompt cache and its snapshots on disk.
pub mod cache;
pub mod heap;
pub mod host;
pub mod images;
pub mod job;
pub mod lane;
pub mod pace;
pub mod snapshot;
pub mod status;

pub use host::{Host, HostConfig, Lost};
pub use job::{event_channel, Command, Event, EventReceiver, EventSender, Finish, FinishReason, Forced, Job, JobError, JobImage, Speculative, TokenLogprob};
pub use lane::token_sha;
pub use status::{LaneStatus, Status};
