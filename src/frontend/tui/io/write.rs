//! The dashboard's writes: commands to the engine, Flux's annotations, stored-release
//! actions and values edits, each bounded by LIMIT, with what a write whose answer never
//! came may still have done.

use std::future::Future;

use kube::api::{Patch, PatchParams};
use kube::{Api, Client};

use crate::api::{FIELD_MANAGER, HelmRelease};
use crate::engine::stored_actions::StoredAction;
use crate::engine::{Command, EngineHandle, ReleaseKey, Views};
use crate::frontend::inventory::Others;
use crate::frontend::inventory::flux::Request;

use super::{LIMIT, human, limited, never_sent};

/// How a write ended when it did not succeed.
#[derive(Debug)]
pub enum WriteError {
    /// The API server refused it, or it never left: nothing was changed.
    Refused(String),
    /// No answer came (a time-out, a connection lost mid-request): it may still be
    /// applied. `expect` tells the dashboard what to look for on the object; `late`, when
    /// the request is still in flight, tells how it ends.
    Unknown {
        why: String,
        expect: Expect,
        late: Option<Late>,
    },
}

/// A write still in flight after the dashboard stopped waiting for it: it is not cut off
/// (cutting it off would make its outcome unknown for good), and its answer is reported
/// when it comes.
#[derive(Debug)]
pub struct Late(tokio::task::JoinHandle<LateOutcome>);

/// How a write in flight ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LateOutcome {
    Applied,
    Refused(String),
    /// The connection failed after all: still unknown, the release is still watched.
    Unknown,
}

impl Late {
    pub async fn outcome(self) -> LateOutcome {
        self.0.await.unwrap_or(LateOutcome::Unknown)
    }
}

impl WriteError {
    /// The write still in flight, if any (taken out, to be awaited on its own).
    pub fn take_late(&mut self) -> Option<Late> {
        match self {
            Self::Unknown { late, .. } => late.take(),
            Self::Refused(_) => None,
        }
    }
}

/// What an object shows once a write whose answer never came has landed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expect {
    Command {
        command: Command,
        token: String,
    },
    Values {
        key: ReleaseKey,
        values: serde_json::Value,
    },
    /// A request on a Flux HelmRelease.
    Flux {
        key: ReleaseKey,
        request: Request,
        token: String,
    },
}

impl Expect {
    pub fn key(&self) -> &ReleaseKey {
        match self {
            Self::Command { command, .. } => command.key(),
            Self::Values { key, .. } | Self::Flux { key, .. } => key,
        }
    }

    /// Whether the objects show the write.
    pub fn landed(&self, views: &Views, others: &Others) -> bool {
        match self {
            Self::Command { command, token } => views
                .get(command.key())
                .is_some_and(|v| command.landed(token, &v.release)),
            Self::Values { key, values } => views
                .get(key)
                .is_some_and(|v| v.release.spec.values.as_ref() == Some(values)),
            Self::Flux {
                key,
                request,
                token,
            } => others
                .flux
                .get(key)
                .is_some_and(|hr| request.landed(token, hr)),
        }
    }
}

/// A write under the time limit: an API answer or a connection never made is a refusal;
/// no answer, or a connection lost after the request may have gone out, is unknown. The
/// request runs on a task of its own and is not cut off at the limit; `applied` says
/// whether its answer means the write took effect.
async fn limited_write<T: Send + 'static>(
    f: impl Future<Output = Result<T, kube::Error>> + Send + 'static,
    expect: Expect,
    applied: fn(&T) -> bool,
) -> Result<T, WriteError> {
    let mut task = tokio::spawn(f);
    let joined = match tokio::time::timeout(LIMIT, &mut task).await {
        Ok(joined) => joined,
        Err(_) => {
            let late = tokio::spawn(async move {
                match task.await {
                    Ok(Ok(v)) if applied(&v) => LateOutcome::Applied,
                    Ok(Ok(_)) => LateOutcome::Refused("the release changed meanwhile".into()),
                    Ok(Err(kube::Error::Api(e))) => LateOutcome::Refused(e.message),
                    _ => LateOutcome::Unknown,
                }
            });
            return Err(WriteError::Unknown {
                why: format!(
                    "no answer from the API server within {}s; it may still be applied",
                    LIMIT.as_secs()
                ),
                expect,
                late: Some(Late(late)),
            });
        }
    };
    match joined {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(kube::Error::Api(e))) => Err(WriteError::Refused(e.message)),
        Ok(Err(e)) if never_sent(&e.to_string()) => Err(WriteError::Refused(human(&e.to_string()))),
        Ok(Err(e)) => Err(WriteError::Unknown {
            why: format!("the connection failed mid-request ({e}); it may still be applied"),
            expect,
            late: None,
        }),
        Err(e) => Err(WriteError::Unknown {
            why: format!("the write's task ended: {e}"),
            expect,
            late: None,
        }),
    }
}

pub async fn send(handle: EngineHandle, command: Command) -> Result<(), WriteError> {
    let token = crate::engine::new_token();
    let expect = Expect::Command {
        command: command.clone(),
        token: token.clone(),
    };
    limited_write(
        async move { handle.send_as(command, token).await },
        expect,
        |_| true,
    )
    .await
}

/// Writes a request on a Flux HelmRelease (a merge patch in Flux's API).
pub async fn send_flux(
    client: Client,
    key: ReleaseKey,
    request: Request,
) -> Result<(), WriteError> {
    let token = crate::engine::new_token();
    let expect = Expect::Flux {
        key: key.clone(),
        request,
        token: token.clone(),
    };
    limited_write(
        async move {
            crate::frontend::inventory::flux::send(client, &key, request, &token)
                .await
                .map(|_| ())
        },
        expect,
        |_| true,
    )
    .await
}

/// Rolls back or uninstalls a release no HelmRelease manages, by the engine's action
/// code. Not under the time limit: hooks may take minutes, and the operator sees it
/// pending meanwhile; it ends with what Helm would print.
pub async fn act_on_stored(
    handle: EngineHandle,
    key: ReleaseKey,
    action: StoredAction,
) -> Result<(), WriteError> {
    match handle.act_on_stored(&key, action).await {
        Ok(message) => {
            tracing::info!(release = %key, "{message}");
            Ok(())
        }
        Err(e) => Err(WriteError::Refused(e)),
    }
}

/// Applies an edited `spec.values`. Only a concurrent change to the values themselves
/// refuses the edit: status writes by the engine change the resourceVersion every few
/// seconds during a rollout, and must not make the operator's edit fail.
pub async fn patch_values(
    client: Client,
    key: ReleaseKey,
    original: serde_json::Value,
    values: serde_json::Value,
) -> Result<(), WriteError> {
    let api: Api<HelmRelease> = Api::namespaced(client, &key.namespace);
    let params = PatchParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..PatchParams::default()
    };
    let expect = Expect::Values {
        key: key.clone(),
        values: values.clone(),
    };
    for _ in 0..3 {
        // A read that fails changed nothing.
        let current = limited(api.get(&key.name))
            .await
            .map_err(WriteError::Refused)?;
        if current.spec.values.unwrap_or_else(|| serde_json::json!({})) != original {
            return Err(WriteError::Refused(
                "spec.values changed since the editor opened; your draft is kept, reopen the \
                 editor to see the new values"
                    .to_owned(),
            ));
        }
        // The values are written whole by a JSON patch: a merge patch cannot write
        // `key: null` (Helm's way to remove a chart default), it deletes the key. The
        // resourceVersion read above, written back, makes a change between the read and
        // this patch a conflict, which is then checked again.
        let ops = serde_json::json!([
            {"op": "replace", "path": "/metadata/resourceVersion",
             "value": current.metadata.resource_version},
            {"op": "add", "path": "/spec/values", "value": values},
        ]);
        let patch = Patch::<()>::Json(serde_json::from_value(ops).expect("a JSON patch"));
        let (api, params, name) = (api.clone(), params.clone(), key.name.clone());
        let result = limited_write(
            async move {
                match api.patch(&name, &params, &patch).await {
                    Err(kube::Error::Api(e)) if e.code == 409 => Ok(false),
                    other => other.map(|_| true),
                }
            },
            expect.clone(),
            |written| *written,
        );
        if result.await? {
            return Ok(());
        }
    }
    Err(WriteError::Refused(
        "the release kept changing while the values were applied; try again".to_owned(),
    ))
}

#[cfg(test)]
mod tests {
    use crate::frontend::tui::io::human;

    #[test]
    fn transport_failures_read_as_a_sentence() {
        assert_eq!(
            human("HyperError: client error (Connect)"),
            "the API server cannot be reached; nothing was changed (the dashboard keeps retrying)"
        );
        assert_eq!(human("forbidden: nope"), "forbidden: nope");
    }
}
