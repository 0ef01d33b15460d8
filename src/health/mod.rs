//! Health checks: readiness rules per kind and the cancellable wait after an action.

pub mod custom;
pub mod diagnosis;
pub mod failfast;
pub mod hub;
pub mod legacy;
pub mod readiness;
pub mod replicas;
pub mod wait;

pub use custom::CustomHealth;
pub use hub::WatchHub;
pub use readiness::{Readiness, Strictness};
pub use wait::{Outcome, Progress, Target, WaitOptions, wait};
