//! Client-side apply's patches computed by the render helper (`helper/patch.go`, on the
//! Kubernetes libraries Helm's kube client calls), on the same running helper as the
//! renders.

use std::path::PathBuf;
use std::time::Duration;

use futures::future::BoxFuture;
use serde::Serialize;
use serde_json::Value;

use super::helper_process::{Slot, ask_running};
use crate::helm::apply::client_side::{ClientSidePatcher, Patch, PatchKind};

/// How long one patch may take to compute.
const TIMEOUT: Duration = Duration::from_secs(10);

pub(super) struct HelperPatcher {
    program: PathBuf,
    process: Slot,
}

impl HelperPatcher {
    pub(super) fn new(program: PathBuf, process: Slot) -> Self {
        Self { program, process }
    }
}

#[derive(Serialize)]
struct Body<'a> {
    patch: Question<'a>,
}

/// The helper's `patchRequest` (patch.go).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Question<'a> {
    original: &'a Value,
    modified: &'a Value,
    current: &'a Value,
    three_way_unstructured: bool,
}

impl ClientSidePatcher for HelperPatcher {
    fn patch<'a>(
        &'a self,
        original: &'a Value,
        modified: &'a Value,
        current: &'a Value,
        three_way_unstructured: bool,
    ) -> BoxFuture<'a, Result<Patch, String>> {
        Box::pin(async move {
            let body = Body {
                patch: Question {
                    original,
                    modified,
                    current,
                    three_way_unstructured,
                },
            };
            let answer = ask_running(&self.program, &self.process, &body, TIMEOUT).await?;
            if let Some(e) = answer.error {
                return Err(e);
            }
            let kind = match answer.patch_type.as_deref() {
                Some("strategic") => PatchKind::Strategic,
                Some("merge") => PatchKind::Merge,
                other => return Err(format!("the render helper answered patch type {other:?}")),
            };
            Ok(Patch {
                kind,
                body: answer.patch.unwrap_or(Value::Null),
            })
        })
    }
}
