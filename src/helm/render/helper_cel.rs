//! Flux's CEL expressions evaluated by the render helper (`helper/cel.go`, on Flux's own
//! `fluxcd/pkg/runtime/cel`), on the same running helper as the renders.

use std::path::PathBuf;
use std::time::Duration;

use futures::future::BoxFuture;
use serde::Serialize;
use serde_json::Value;

use super::helper_process::{Response, Slot, ask_running};
use crate::api::CustomHealthCheck;
use crate::helm::render::cel::{CelError, CelEvaluator, Verdict};

/// How long one evaluation may take (the helper bounds it at 5 s itself).
const TIMEOUT: Duration = Duration::from_secs(10);

/// What the helper prefixes to an expression that does not compile.
const INVALID: &str = "invalid CEL expression: ";

pub(super) struct HelperCel {
    program: PathBuf,
    process: Slot,
}

impl HelperCel {
    pub(super) fn new(program: PathBuf, process: Slot) -> Self {
        Self { program, process }
    }

    async fn ask(&self, question: CelQuestion<'_>) -> Result<Response, CelError> {
        ask_running(
            &self.program,
            &self.process,
            &Body { cel: question },
            TIMEOUT,
        )
        .await
        .map_err(CelError::Unavailable)
    }
}

/// The helper's error: an expression that does not compile, or one that failed on this
/// object.
fn failed(error: String) -> CelError {
    match error.strip_prefix(INVALID) {
        Some(why) => CelError::Invalid(why.to_owned()),
        None => CelError::Evaluation(error),
    }
}

impl CelEvaluator for HelperCel {
    fn check_health<'a>(
        &'a self,
        checks: &'a [CustomHealthCheck],
    ) -> BoxFuture<'a, Result<(), CelError>> {
        Box::pin(async move {
            let answer = self
                .ask(CelQuestion {
                    health_check_exprs: checks,
                    ..CelQuestion::default()
                })
                .await?;
            answer.error.map_or(Ok(()), |e| Err(failed(e)))
        })
    }

    fn judge<'a>(
        &'a self,
        checks: &'a [CustomHealthCheck],
        object: &'a Value,
    ) -> BoxFuture<'a, Result<Verdict, CelError>> {
        Box::pin(async move {
            let answer = self
                .ask(CelQuestion {
                    health_check_exprs: checks,
                    object: Some(object),
                    ..CelQuestion::default()
                })
                .await?;
            if let Some(e) = answer.error {
                return Err(failed(e));
            }
            let said = answer.message.filter(|m| !m.is_empty());
            match answer.status.as_deref() {
                Some("Current") => Ok(Verdict::Current),
                Some("Failed") => Ok(Verdict::Failed(said)),
                Some("InProgress") => Ok(Verdict::InProgress(said)),
                other => Err(CelError::Unavailable(format!(
                    "the render helper answered status {other:?}"
                ))),
            }
        })
    }

    fn ready<'a>(
        &'a self,
        expr: &'a str,
        objects: Option<(&'a Value, &'a Value)>,
    ) -> BoxFuture<'a, Result<bool, CelError>> {
        Box::pin(async move {
            let answer = self
                .ask(CelQuestion {
                    ready_expr: expr,
                    this: objects.map(|(this, _)| this),
                    dep: objects.map(|(_, dep)| dep),
                    ..CelQuestion::default()
                })
                .await?;
            if let Some(e) = answer.error {
                return Err(failed(e));
            }
            match (objects, answer.ready) {
                (None, _) => Ok(true),
                (Some(_), Some(ready)) => Ok(ready),
                (Some(_), None) => Err(CelError::Unavailable(
                    "the render helper answered without a verdict".into(),
                )),
            }
        })
    }
}

#[derive(Serialize)]
struct Body<'a> {
    cel: CelQuestion<'a>,
}

/// The helper's `celRequest` (cel.go).
#[derive(Serialize, Default)]
#[serde(rename_all = "camelCase")]
struct CelQuestion<'a> {
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    health_check_exprs: &'a [CustomHealthCheck],
    #[serde(skip_serializing_if = "Option::is_none")]
    object: Option<&'a Value>,
    #[serde(skip_serializing_if = "str::is_empty")]
    ready_expr: &'a str,
    #[serde(rename = "self", skip_serializing_if = "Option::is_none")]
    this: Option<&'a Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    dep: Option<&'a Value>,
}
