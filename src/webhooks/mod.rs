//! HTTP to and from the world outside the cluster: notifications of what releases did
//! (Slack-compatible, generic JSON, Flux's notification-controller), and receivers of
//! pushes to chart sources that wake the releases they feed.

pub mod notify;
pub mod receive;
