//! Custom resources judged by CEL (Flux's `spec.healthCheckExprs`) in the wait, in place
//! of the built-in rules (see `crate::helm::render::cel`).

use std::sync::Arc;

use serde_json::Value;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::readiness::Readiness;
use crate::api::CustomHealthCheck;
use crate::helm::render::cel::{CelError, CelEvaluator, Verdict};

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
    /// reason, as kstatus' generic reader counts an error of its status function. One
    /// still unanswered when `cancel` fires or `deadline` passes is given up ("not
    /// evaluated"): the wait that asked must end at once, whatever the evaluator does.
    pub async fn judge(
        &self,
        object: &Value,
        cancel: &CancellationToken,
        deadline: Instant,
    ) -> Readiness {
        let answer = tokio::select! {
            biased;
            () = cancel.cancelled() => Err(CelError::Unavailable("the wait was cancelled".into())),
            () = tokio::time::sleep_until(deadline) => Err(CelError::Unavailable("the wait's deadline passed".into())),
            answer = self.evaluator.judge(&self.checks, object) => answer,
        };
        match answer {
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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use futures::future::BoxFuture;

    use super::*;

    /// An evaluator that never answers (a hung helper).
    struct Silent;

    impl CelEvaluator for Silent {
        fn check_health<'a>(
            &'a self,
            _: &'a [CustomHealthCheck],
        ) -> BoxFuture<'a, Result<(), CelError>> {
            Box::pin(futures::future::pending())
        }
        fn judge<'a>(
            &'a self,
            _: &'a [CustomHealthCheck],
            _: &'a Value,
        ) -> BoxFuture<'a, Result<Verdict, CelError>> {
            Box::pin(futures::future::pending())
        }
        fn ready<'a>(
            &'a self,
            _: &'a str,
            _: Option<(&'a Value, &'a Value)>,
        ) -> BoxFuture<'a, Result<bool, CelError>> {
            Box::pin(futures::future::pending())
        }
    }

    #[tokio::test]
    async fn a_silent_evaluator_never_holds_up_a_cancelled_or_expired_wait() {
        let custom = CustomHealth {
            checks: Arc::from(Vec::new()),
            evaluator: Arc::new(Silent),
        };
        let object = serde_json::json!({});
        let far = Instant::now() + Duration::from_secs(3600);
        let cancelled = CancellationToken::new();
        cancelled.cancel();
        let judged = tokio::time::timeout(
            Duration::from_secs(5),
            custom.judge(&object, &cancelled, far),
        )
        .await
        .expect("a cancelled wait is not held up");
        assert!(matches!(judged, Readiness::InProgress(m) if m.contains("cancelled")));
        let judged = tokio::time::timeout(
            Duration::from_secs(5),
            custom.judge(&object, &CancellationToken::new(), Instant::now()),
        )
        .await
        .expect("an expired wait is not held up");
        assert!(matches!(judged, Readiness::InProgress(m) if m.contains("deadline")));
    }
}
