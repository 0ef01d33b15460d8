//! Wheelhouse's webhook receivers as an operator sets them up (the ConfigMap beside the
//! Lease, a token in a Secret), and calls to them as senders make them.

use hmac::{KeyInit, Mac};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client};

/// A receiver set up as an operator would: the ConfigMap beside the Lease, the token in
/// a Secret, waking every HelmRelease of `ns`; returns its path (Flux's).
pub async fn receiver(client: &Client, ns: &str, name: &str, kind: &str, token: &str) -> String {
    let resources = format!("[{{kind: HelmRelease, name: '*', namespace: {ns}}}]");
    receiver_of(client, ns, name, kind, token, &resources).await
}

/// [`receiver`] waking the HelmReleases `resources` (Flux's Receiver field, as YAML).
pub async fn receiver_of(
    client: &Client,
    ns: &str,
    name: &str,
    kind: &str,
    token: &str,
    resources: &str,
) -> String {
    let secret: Secret = super::from_yaml(&format!(
        "metadata: {{name: {name}-token}}\nstringData: {{token: {token}}}"
    ));
    Api::<Secret>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    let mut config = configmaps
        .get_opt(wheelhouse::webhooks::receive::CONFIGMAP)
        .await
        .unwrap()
        .and_then(|c| c.data)
        .and_then(|d| d.get(wheelhouse::webhooks::receive::KEY).cloned())
        .unwrap_or_else(|| "receivers:\n".into());
    config.push_str(&format!(
        "- {{name: {name}, type: {kind}, secretRef: {{name: {name}-token}}, resources: {resources}}}\n"
    ));
    let cm: ConfigMap = serde_json::from_value(serde_json::json!({
        "metadata": {"name": wheelhouse::webhooks::receive::CONFIGMAP},
        "data": {wheelhouse::webhooks::receive::KEY: config},
    }))
    .unwrap();
    configmaps
        .patch(
            wheelhouse::webhooks::receive::CONFIGMAP,
            &PatchParams::apply("wheelhouse-tests").force(),
            &Patch::Apply(&cm),
        )
        .await
        .unwrap();
    wheelhouse::webhooks::receive::path_of(token.as_bytes(), name, ns)
}

/// POSTs `body` with `headers` to the controller's receivers; the status code.
pub fn post(port: u16, path: &str, headers: &[(&str, &str)], body: &[u8]) -> u16 {
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), body).unwrap();
    let mut command = std::process::Command::new("curl");
    command.args(["-s", "-o", "/dev/null", "-w", "%{http_code}", "-X", "POST"]);
    for (k, v) in headers {
        command.args(["-H", &format!("{k}: {v}")]);
    }
    let out = command
        .args(["--data-binary", &format!("@{}", file.path().display())])
        .arg(format!("http://127.0.0.1:{port}{path}"))
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .unwrap_or(0)
}

/// GitHub's `X-Hub-Signature-256` of `body`.
pub fn github_signature(token: &str, body: &[u8]) -> String {
    let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(token.as_bytes()).unwrap();
    mac.update(body);
    format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
}

/// POSTs `body` with `headers` to the receivers on 127.0.0.1:`port` from this process
/// (HTTP/1.1 over one connection, as a sender's server would); the status code.
pub async fn post_async(port: u16, path: &str, headers: &[(&str, &str)], body: &[u8]) -> u16 {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    let mut request = format!(
        "POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for (k, v) in headers {
        request.push_str(&format!("{k}: {v}\r\n"));
    }
    request.push_str("\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    stream.write_all(body).await.unwrap();
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).await.unwrap();
    // "HTTP/1.1 200 OK"
    String::from_utf8_lossy(&answer)
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or(0)
}
