//! Why a pod is not ready, in one line, for the screens that show pods.

use k8s_openapi::api::core::v1::Pod;

/// Why a pod is not ready, or None when it is.
pub fn pod_problem(pod: &Pod) -> Option<String> {
    let status = pod.status.as_ref()?;
    let ready = status
        .conditions
        .as_ref()
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
    if ready || status.phase.as_deref() == Some("Succeeded") {
        return None;
    }
    for cs in status.container_statuses.iter().flatten() {
        if let Some(state) = &cs.state {
            if let Some(w) = &state.waiting {
                let reason = w.reason.clone().unwrap_or_else(|| "Waiting".into());
                return Some(match &w.message {
                    Some(m) => format!("{} ({reason}): {m}", cs.name),
                    None => format!("{} ({reason})", cs.name),
                });
            }
            if let Some(t) = &state.terminated {
                return Some(format!(
                    "{} terminated ({})",
                    cs.name,
                    t.reason.clone().unwrap_or_default()
                ));
            }
        }
        if !cs.ready {
            return Some(format!(
                "{} not ready (restarts {})",
                cs.name, cs.restart_count
            ));
        }
    }
    let cond = status
        .conditions
        .iter()
        .flatten()
        .find(|c| c.status != "True" && c.reason.is_some());
    Some(match cond {
        Some(c) => format!(
            "{}: {}",
            c.reason.clone().unwrap_or_default(),
            c.message.clone().unwrap_or_default()
        ),
        None => format!(
            "phase {}",
            status.phase.clone().unwrap_or_else(|| "Unknown".into())
        ),
    })
}
