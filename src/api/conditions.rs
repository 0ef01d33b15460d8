//! Condition types and reasons of a HelmRelease's status, in Flux's vocabulary so
//! existing alerts and habits carry over. Everything that reads or writes status (the
//! engine, the notifier, the dashboard) speaks these names.

pub mod condition {
    pub const READY: &str = "Ready";
    pub const RECONCILING: &str = "Reconciling";
    pub const STALLED: &str = "Stalled";
    pub const RELEASED: &str = "Released";
    pub const TEST_SUCCESS: &str = "TestSuccess";
    pub const REMEDIATED: &str = "Remediated";
    /// True while live objects differ from the newest revision's manifest.
    pub const DRIFTED: &str = "Drifted";
}

pub mod reason {
    /// Event reasons of the incident freeze (src/engine/freeze.rs) and of the dashboard's
    /// audit of its writes (src/frontend/tui/io/audit.rs).
    pub const FROZEN: &str = "Frozen";
    pub const THAWED: &str = "Thawed";
    pub const AUDITED: &str = "Audited";
    pub const INSTALL_SUCCEEDED: &str = "InstallSucceeded";
    pub const INSTALL_FAILED: &str = "InstallFailed";
    pub const UPGRADE_SUCCEEDED: &str = "UpgradeSucceeded";
    pub const UPGRADE_FAILED: &str = "UpgradeFailed";
    pub const TEST_SUCCEEDED: &str = "TestSucceeded";
    pub const TEST_FAILED: &str = "TestFailed";
    pub const ROLLBACK_SUCCEEDED: &str = "RollbackSucceeded";
    pub const ROLLBACK_FAILED: &str = "RollbackFailed";
    pub const UNINSTALL_SUCCEEDED: &str = "UninstallSucceeded";
    pub const UNINSTALL_FAILED: &str = "UninstallFailed";
    pub const ARTIFACT_FAILED: &str = "ArtifactFailed";
    pub const INIT_FAILED: &str = "InitFailed";
    pub const DEPENDENCY_NOT_READY: &str = "DependencyNotReady";
    pub const HEALTH_CHECK_CANCELED: &str = "HealthCheckCanceled";
    pub const HEALTH_CHECK_FAILED: &str = "HealthCheckFailed";
    pub const PROGRESSING: &str = "Progressing";
    /// Reconciling while a failed install or upgrade waits for its retry
    /// (`strategy.name: RetryOnFailure`).
    pub const PROGRESSING_WITH_RETRY: &str = "ProgressingWithRetry";
    pub const RETRIES_EXCEEDED: &str = "RetriesExceeded";
    pub const UNLOCKED: &str = "Unlocked";
    pub const WAIT_RESUMED: &str = "WaitResumed";
    /// Another HelmRelease manages the Helm release this one names.
    pub const RELEASE_CONFLICT: &str = "ReleaseConflict";
    /// Objects were left unpruned because an API group could not be discovered.
    pub const DISCOVERY_INCOMPLETE: &str = "DiscoveryIncomplete";
    /// The API server refused one of the engine's calls (403).
    pub const FORBIDDEN: &str = "Forbidden";
    /// A reconcile ended with an error that is neither the release's action nor a refusal
    /// (an API call that failed, say); retried with backoff.
    pub const RECONCILE_ERROR: &str = "ReconcileError";
    /// dependsOn leads back to the release itself.
    pub const DEPENDENCY_CYCLE: &str = "DependencyCycle";
    /// Live objects differ from the newest revision's manifest.
    pub const DRIFTED: &str = "Drifted";
    /// Drifted objects were applied again (driftDetection.mode enabled).
    pub const DRIFT_CORRECTED: &str = "DriftCorrected";
    /// Another field manager keeps changing a field back after corrections: it is left
    /// to that manager.
    pub const DRIFT_CONTESTED: &str = "DriftContested";
    /// The newest revision in Helm's storage was written by another tool.
    pub const EXTERNAL_REVISION: &str = "ExternalRevision";
    /// The object's spec does not decode (wheelhouse cannot read it).
    pub const INVALID_SPEC: &str = "InvalidSpec";
    /// The tenancy policy refuses what the release asks (a cross-namespace reference),
    /// or the ServiceAccount it acts as does not exist (Flux's reason for the former).
    pub const ACCESS_DENIED: &str = "AccessDenied";
    /// A CEL expression of `healthCheckExprs` or `dependsOn[].readyExpr` does not compile
    /// (Flux's reason), or nothing here can evaluate it (the helm CLI renderer).
    pub const INVALID_CEL_EXPRESSION: &str = "InvalidCELExpression";
    /// A failed upgrade's rollback has no earlier deployed revision to go to.
    pub const MISSING_ROLLBACK_TARGET: &str = "MissingRollbackTarget";
    /// Rolled back to a revision and kept there (`rollbackTo` with pin).
    pub const PINNED: &str = "Pinned";
    /// A pinned release resumed: the spec applies again.
    pub const RESUMED: &str = "Resumed";
    /// A rollback request that cannot be carried out (no such revision, not ours).
    pub const ROLLBACK_REFUSED: &str = "RollbackRefused";
}
