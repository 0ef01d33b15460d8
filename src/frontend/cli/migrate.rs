//! `wheelhouse migrate`: a Flux HelmRelease as a wheelhouse one, printed or applied.
//!
//! The mapping is [`crate::frontend::migrate::convert`]; this reads the Flux objects, prints what
//! was not carried, and with `--apply` hands the release over: the Flux object must be
//! suspended (or is suspended with `--suspend-flux`) before the wheelhouse one is applied,
//! and it is never deleted.

use clap::Args;
use kube::api::{ApiResource, DynamicObject, Patch, PatchParams};
use kube::{Api, Client};
use serde_json::{Value, json};

use super::ClusterArgs;
use crate::api::flux::FluxHelmRelease;
use crate::api::{FIELD_MANAGER, HelmRelease};
use crate::cluster::client;
use crate::engine::Error;
use crate::engine::Result;
use crate::frontend::migrate::{self, Migrated, Repository};

#[derive(Debug, Args)]
pub struct MigrateArgs {
    /// The Flux HelmRelease (helm.toolkit.fluxcd.io/v2), as NAMESPACE/NAME, or NAME in
    /// --namespace (default: the context's namespace).
    #[arg(value_name = "NAMESPACE/NAME")]
    pub release: String,

    /// Apply the wheelhouse HelmRelease (server-side, field manager `wheelhouse`) instead
    /// of printing it. The Flux HelmRelease must be suspended first; it is never deleted.
    #[arg(long)]
    pub apply: bool,

    /// With --apply: suspend the Flux HelmRelease (spec.suspend: true) if it is not.
    #[arg(long, requires = "apply")]
    pub suspend_flux: bool,

    /// The chart's Helm repository, in place of the Flux source: for a chart Flux reads
    /// from a source wheelhouse cannot (a Bucket), or to move the chart elsewhere. For a
    /// chartRef or a Bucket, the chart's name and version are the ones Flux last deployed.
    #[arg(long, value_name = "URL", value_parser = parse_repository)]
    pub chart_repository: Option<String>,

    /// Write the wheelhouse HelmRelease suspended (default: active, so that it takes over).
    #[arg(long)]
    pub suspended: bool,
}

fn parse_repository(s: &str) -> std::result::Result<String, String> {
    if ["http://", "https://", "oci://"]
        .iter()
        .any(|p| s.starts_with(p) && s.len() > p.len())
    {
        Ok(s.to_owned())
    } else {
        Err(format!(
            "expected an http://, https:// or oci:// URL, got {s:?}"
        ))
    }
}

/// A message for the operator, as the crate's error (printed as `wheelhouse: <message>`).
fn fail(message: impl Into<String>) -> Error {
    Error::Io(std::io::Error::other(message.into()))
}

pub async fn run(cluster: &ClusterArgs, args: MigrateArgs) -> Result<()> {
    let target = cluster.target();
    let (client, default_namespace) = client::connect(&target).await?;
    let (namespace, name) = match args.release.split_once('/') {
        Some((ns, name)) if !ns.is_empty() && !name.is_empty() && !name.contains('/') => {
            (ns.to_owned(), name.to_owned())
        }
        None if !args.release.is_empty() => (
            cluster.namespace.clone().unwrap_or(default_namespace),
            args.release.clone(),
        ),
        _ => {
            return Err(fail(format!(
                "expected NAMESPACE/NAME of a Flux HelmRelease, got {:?}",
                args.release
            )));
        }
    };
    let from = format!("{namespace}/{name}");
    let flux_api: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        &namespace,
        &ApiResource::erase::<FluxHelmRelease>(&()),
    );
    let flux = match flux_api.get_opt(&name).await {
        Ok(Some(obj)) => serde_json::to_value(obj).map_err(|e| fail(e.to_string()))?,
        Ok(None) => return Err(fail(format!("no Flux HelmRelease {from}"))),
        Err(e) => return Err(e.into()),
    };

    let repository = repository(&client, &flux, &from, args.chart_repository).await?;
    let migrated = match migrate::convert(&flux, repository.as_ref()) {
        Ok(m) => m,
        Err(migrate::Error::Refused {
            reason,
            not_carried,
        }) => {
            print_list(&not_carried, &[]);
            return Err(fail(format!("cannot migrate {from}: {reason}")));
        }
        Err(e) => return Err(fail(format!("cannot migrate {from}: {e}"))),
    };
    let mut migrated = migrated;
    if args.suspended {
        migrated.object["spec"]["suspend"] = Value::Bool(true);
        migrated.release.spec.suspend = true;
    }
    print_list(&migrated.not_carried, &migrated.notes);
    if !args.apply {
        print!("{}", migrate::to_yaml(&migrated, &from));
        return Ok(());
    }
    apply(
        &client,
        &flux_api,
        &flux,
        &migrated,
        &from,
        args.suspend_flux,
    )
    .await
}

/// The chart's source: the URL given, else the Flux source the release names (read
/// whole), and for a HelmChart the source it names in turn.
async fn repository(
    client: &Client,
    flux: &Value,
    from: &str,
    url: Option<String>,
) -> Result<Option<Repository>> {
    if let Some(url) = url {
        return Ok(Some(Repository::Url(url)));
    }
    let Some(reference) = migrate::chart_ref(flux).or_else(|| migrate::source_ref(flux)) else {
        return Ok(None);
    };
    let Some(object) = read_source(client, &reference, from).await? else {
        return Ok(None);
    };
    if reference.kind != "HelmChart" {
        return Ok(Some(wrap(&reference.kind, object)));
    }
    let source = match migrate::helm_chart_source(&object) {
        Some(inner) => read_source(client, &inner, from)
            .await?
            .map(|o| Box::new(wrap(&inner.kind, o))),
        None => None,
    };
    Ok(Some(Repository::HelmChart {
        chart: object,
        source,
    }))
}

fn wrap(kind: &str, object: Value) -> Repository {
    match kind {
        "OCIRepository" => Repository::OciRepository(object),
        "GitRepository" => Repository::GitRepository(object),
        _ => Repository::HelmRepository(object),
    }
}

/// A Flux source (`source.toolkit.fluxcd.io`, v1, else v1beta2 for an OCIRepository of
/// Flux before 2.6), whole. `None` for a kind wheelhouse does not read (a Bucket).
async fn read_source(
    client: &Client,
    source: &migrate::SourceRef,
    from: &str,
) -> Result<Option<Value>> {
    let plural = match source.kind.as_str() {
        "HelmRepository" => "helmrepositories",
        "OCIRepository" => "ocirepositories",
        "GitRepository" => "gitrepositories",
        "HelmChart" => "helmcharts",
        _ => return Ok(None),
    };
    let versions: &[&str] = if source.kind == "OCIRepository" {
        &["v1", "v1beta2"]
    } else {
        &["v1"]
    };
    for version in versions {
        let resource = ApiResource {
            group: crate::api::flux::SOURCE_GROUP.into(),
            version: (*version).into(),
            api_version: format!("{}/{version}", crate::api::flux::SOURCE_GROUP),
            kind: source.kind.clone(),
            plural: plural.into(),
        };
        let api: Api<DynamicObject> =
            Api::namespaced_with(client.clone(), &source.namespace, &resource);
        match api.get_opt(&source.name).await {
            Ok(Some(obj)) => {
                return Ok(Some(
                    serde_json::to_value(obj).map_err(|e| fail(e.to_string()))?,
                ));
            }
            Ok(None) => {}
            // The version is not served (an older or newer Flux): the next, or none.
            Err(kube::Error::Api(status)) if status.code == 404 => {}
            Err(e) => return Err(e.into()),
        }
    }
    Err(fail(format!(
        "no Flux {} {}/{} ({}/{}), which HelmRelease {from} takes its chart from; create it, or give the chart's repository with --chart-repository URL",
        source.kind,
        source.namespace,
        source.name,
        crate::api::flux::SOURCE_GROUP,
        versions[0]
    )))
}

/// What was not carried and the notes, on stderr.
fn print_list(not_carried: &[String], notes: &[String]) {
    // They quote the Flux object's own text (names, values): escaped for the terminal.
    for line in not_carried {
        eprintln!("not carried: {}", crate::text::escape::escape(line));
    }
    for line in notes {
        eprintln!("note: {}", crate::text::escape::escape(line));
    }
}

/// Hands the release over: Flux suspended (or refused), the wheelhouse HelmRelease
/// checked by the API server (a dry run) before anything changes, then applied.
async fn apply(
    client: &Client,
    flux_api: &Api<DynamicObject>,
    flux: &Value,
    migrated: &Migrated,
    from: &str,
    suspend_flux: bool,
) -> Result<()> {
    let (namespace, name) = from.split_once('/').unwrap_or_default();
    let suspended = flux.pointer("/spec/suspend").and_then(Value::as_bool) == Some(true);
    if !suspended && !suspend_flux {
        return Err(fail(format!(
            "the Flux HelmRelease {from} is not suspended, so helm-controller would go on acting on the release beside wheelhouse. Suspend it first (`flux suspend hr {name} -n {namespace}`, or from the dashboard), or pass --suspend-flux to have migrate suspend it"
        )));
    }
    let api: Api<HelmRelease> = Api::namespaced(client.clone(), namespace);
    let existed = match api.get_opt(name).await {
        Ok(found) => found.is_some(),
        Err(kube::Error::Api(status)) if status.code == 404 => return Err(Error::CrdMissing),
        Err(e) => return Err(e.into()),
    };
    // The API server checks the object (schema, CEL rules) before Flux is touched.
    api.patch(
        name,
        &PatchParams::apply(FIELD_MANAGER).dry_run(),
        &Patch::Apply(&migrated.object),
    )
    .await
    .map_err(|e| refused(e, from, "nothing was changed"))?;
    if !suspended {
        flux_api
            .patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"suspend": true}})),
            )
            .await?;
        println!("suspended Flux HelmRelease {from} (spec.suspend: true)");
    }
    api.patch(
        name,
        &PatchParams::apply(FIELD_MANAGER),
        &Patch::Apply(&migrated.object),
    )
    .await
    .map_err(|e| {
        refused(
            e,
            from,
            "the Flux HelmRelease is suspended: resume it to give the release back to Flux",
        )
    })?;
    let h = &migrated.helm;
    println!(
        "applied HelmRelease {from} (wheelhouse.dev/v1alpha1, field manager {FIELD_MANAGER}): {}",
        if existed { "configured" } else { "created" }
    );
    println!(
        "it manages Helm release {} in namespace {} (stored in {}){}{}",
        h.release_name,
        h.target_namespace,
        h.storage_namespace,
        h.revision
            .map(|r| format!("; its next revision follows revision {r}"))
            .unwrap_or_default(),
        if migrated.release.spec.suspend {
            "; it is suspended (--suspended)"
        } else {
            ""
        }
    );
    println!(
        "the Flux HelmRelease {from} is left in place, suspended; once wheelhouse reports the release Ready, delete it while it is suspended (Flux then uninstalls nothing): kubectl delete helmreleases.helm.toolkit.fluxcd.io {name} -n {namespace}"
    );
    Ok(())
}

/// The API server's refusal of the wheelhouse HelmRelease, said as such.
fn refused(e: kube::Error, from: &str, state: &str) -> Error {
    match e {
        kube::Error::Api(status) if status.code == 404 => Error::CrdMissing,
        kube::Error::Api(status) => fail(format!(
            "the API server refused the wheelhouse HelmRelease {from}: {} ({state})",
            status.message
        )),
        e => e.into(),
    }
}
