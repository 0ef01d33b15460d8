//! Flux's CEL expressions (`spec.healthCheckExprs`, `spec.dependsOn[].readyExpr`): what
//! the health wait and the engine ask of them, and the one thing that answers (the render
//! helper, which evaluates them with Flux's own Go package, so an expression means what it
//! means to helm-controller). Here only the questions: the answers come from `render`.

use futures::future::BoxFuture;
use serde_json::Value;

use crate::api::CustomHealthCheck;

/// Why an expression gave no answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CelError {
    /// It does not compile (or a check is malformed): the release is stalled until its
    /// spec changes, as helm-controller stalls it (`InvalidCELExpression`).
    #[error("{0}")]
    Invalid(String),
    /// It compiled, but this object made it fail (`no such key: conditions` before the
    /// object has a status): the object is not current yet, as kstatus counts it.
    #[error("{0}")]
    Evaluation(String),
    /// Nothing could evaluate it (the evaluator is not running): the engine's fault,
    /// never the release's.
    #[error("{0}")]
    Unavailable(String),
}

/// How health check expressions judge an object (kstatus' words).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Current,
    /// With what was said of it, if anything.
    InProgress(Option<String>),
    Failed(Option<String>),
}

/// Evaluates CEL with Flux's meaning.
pub trait CelEvaluator: Send + Sync {
    /// Checks that every expression of `checks` compiles.
    fn check_health<'a>(
        &'a self,
        checks: &'a [CustomHealthCheck],
    ) -> BoxFuture<'a, Result<(), CelError>>;
    /// How `object` stands by the check of `checks` for its kind.
    fn judge<'a>(
        &'a self,
        checks: &'a [CustomHealthCheck],
        object: &'a Value,
    ) -> BoxFuture<'a, Result<Verdict, CelError>>;
    /// Whether `dep` is ready by `expr`, for the HelmRelease `this` (both whole objects,
    /// as `(this, dep)`); without them, only whether `expr` compiles.
    fn ready<'a>(
        &'a self,
        expr: &'a str,
        objects: Option<(&'a Value, &'a Value)>,
    ) -> BoxFuture<'a, Result<bool, CelError>>;
}
