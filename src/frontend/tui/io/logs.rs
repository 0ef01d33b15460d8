//! Streaming a workload's pod logs.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::{Api, Client};

use super::{LIMIT, human};

/// Streams a pod's logs to the UI loop in batches (at most every 100 ms, so a chatty pod
/// costs a redraw a tenth of a second, not one per line), until the stream ends; its
/// end, or why it failed, goes last. Cancelled by aborting the task.
pub async fn stream_logs(
    client: Client,
    source: crate::frontend::tui::components::logs::LogSource,
    tx: tokio::sync::mpsc::UnboundedSender<crate::frontend::tui::effect::IoResult>,
) {
    use crate::frontend::tui::effect::IoResult;
    use futures::{AsyncBufReadExt, StreamExt};
    let api: Api<Pod> = Api::namespaced(client, &source.namespace);
    let params = kube::api::LogParams {
        tail_lines: Some(crate::frontend::tui::components::logs::TAIL),
        previous: source.previous,
        follow: source.follow,
        ..kube::api::LogParams::default()
    };
    let stream = source.stream;
    let reader = match tokio::time::timeout(LIMIT, api.log_stream(&source.pod, &params)).await {
        Ok(Ok(r)) => r,
        Ok(Err(e)) => {
            let _ = tx.send(IoResult::LogEnd {
                stream,
                failed: Some(human(&e.to_string())),
            });
            return;
        }
        Err(_) => {
            let _ = tx.send(IoResult::LogEnd {
                stream,
                failed: Some(format!(
                    "no answer from the API server within {}s",
                    LIMIT.as_secs()
                )),
            });
            return;
        }
    };
    let mut lines = reader.lines().ready_chunks(500);
    let mut batch: Vec<String> = Vec::new();
    let mut flush = tokio::time::interval(Duration::from_millis(100));
    loop {
        tokio::select! {
            next = lines.next() => match next {
                Some(chunk) => {
                    for line in chunk {
                        match line {
                            Ok(l) => batch.push(l),
                            Err(e) => {
                                let _ = tx.send(IoResult::LogLines { stream, lines: std::mem::take(&mut batch) });
                                let _ = tx.send(IoResult::LogEnd { stream, failed: Some(e.to_string()) });
                                return;
                            }
                        }
                    }
                }
                None => break,
            },
            _ = flush.tick() => {
                if !batch.is_empty() {
                    let _ = tx.send(IoResult::LogLines { stream, lines: std::mem::take(&mut batch) });
                }
            }
        }
    }
    let _ = tx.send(IoResult::LogLines {
        stream,
        lines: batch,
    });
    let _ = tx.send(IoResult::LogEnd {
        stream,
        failed: None,
    });
}
