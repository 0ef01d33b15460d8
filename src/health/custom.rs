//! Custom resources judged by CEL (Flux's `spec.healthCheckExprs`) in the wait, in place
//! of the built-in rules (see `crate::cel`).

use std::sync::Arc;

use serde_json::Value;

use super::readiness::Readiness;
use crate::api::CustomHealthCheck;
use crate::cel::{CelError, CelEvaluator, Verdict};

/// A release's custom health checks with what evaluates them.
#[derive(Clone)]
pub struct CustomHealth {
    pub checks: Arc<[CustomHealthCheck]>,
    pub evaluator: Arc<dyn CelEvaluator>,
}

impl std::fmt::Debug for CustomHealth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CustomHealth")
            .field("checks", &self.checks)
            .finish_non_exhaustive()
    }
}

impl CustomHealth {
    /// Whether an expression judges objects of this kind (instead of the built-in rules).
    pub fn judges(&self, api_version: &str, kind: &str) -> bool {
        self.checks.iter().any(|c| c.judges(api_version, kind))
    }

    /// How `object` stands. An evaluation that fails is "not current yet" with the
    /// reason, as kstatus' generic reader counts an error of its status function.
    pub async fn judge(&self, object: &Value) -> Readiness {
        match self.evaluator.judge(&self.checks, object).await {
            Ok(Verdict::Current) => Readiness::Ready,
            Ok(Verdict::Failed(said)) => Readiness::Failed(
                said.unwrap_or_else(|| "its health check expression `failed` is true".into()),
            ),
            Ok(Verdict::InProgress(said)) => Readiness::InProgress(
                said.unwrap_or_else(|| "its health check expressions say it is in progress".into()),
            ),
            Err(CelError::Evaluation(e)) => {
                Readiness::InProgress(format!("its health check expression: {e}"))
            }
            Err(e @ (CelError::Invalid(_) | CelError::Unavailable(_))) => Readiness::InProgress(
                format!("its health check expression was not evaluated: {e}"),
            ),
        }
    }
}
