//! The few URL operations a Helm repository needs, on plain strings: the index location,
//! resolving an index entry's (possibly relative) chart URL, and hiding userinfo in
//! messages.

/// `<repository>/index.yaml`, keeping a query string (some repositories carry a token).
pub fn index_url(repository: &str) -> String {
    let (base, query) = split_query(repository);
    let mut url = format!("{}/index.yaml", base.trim_end_matches('/'));
    if let Some(q) = query {
        url.push('?');
        url.push_str(q);
    }
    url
}

/// Resolves a chart URL from the index against the repository, as Helm does: the
/// repository URL is treated as a directory, and its query string is carried over to a
/// relative reference that has none.
pub fn chart_url(repository: &str, reference: &str) -> String {
    let (base, query) = split_query(repository);
    let dir = format!("{}/", base.trim_end_matches('/'));
    let mut url = resolve_reference(&dir, reference);
    if !has_scheme(reference)
        && !reference.contains('?')
        && let Some(q) = query
    {
        url.push('?');
        url.push_str(q);
    }
    url
}

/// RFC 3986 reference resolution for the forms that occur in indexes and redirects:
/// absolute, scheme-relative (`//host/x`), absolute-path (`/x`) and relative-path (`x`,
/// `../x`).
pub fn resolve_reference(base: &str, reference: &str) -> String {
    if has_scheme(reference) {
        return reference.to_owned();
    }
    let (scheme, rest) = base.split_once("://").unwrap_or(("https", base));
    if let Some(r) = reference.strip_prefix("//") {
        return format!("{scheme}://{r}");
    }
    let (base_path_and_more, _) = split_query(rest);
    let base_path_and_more = base_path_and_more
        .split_once('#')
        .map_or(base_path_and_more, |(b, _)| b);
    let (authority, base_path) = match base_path_and_more.find('/') {
        Some(i) => base_path_and_more.split_at(i),
        None => (base_path_and_more, "/"),
    };
    let (ref_path, ref_query) = match reference.find(['?', '#']) {
        Some(i) => reference.split_at(i),
        None => (reference, ""),
    };
    let merged = if ref_path.starts_with('/') {
        ref_path.to_owned()
    } else if ref_path.is_empty() {
        base_path.to_owned()
    } else {
        let dir = &base_path[..base_path.rfind('/').map_or(0, |i| i + 1)];
        format!("{dir}{ref_path}")
    };
    format!(
        "{scheme}://{authority}{}{ref_query}",
        remove_dot_segments(&merged)
    )
}

pub use crate::text::url::redact;

fn has_scheme(reference: &str) -> bool {
    match reference.find(':') {
        Some(i) => {
            let scheme = &reference[..i];
            !scheme.is_empty()
                && scheme.starts_with(|c: char| c.is_ascii_alphabetic())
                && scheme
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
        }
        None => false,
    }
}

fn split_query(url: &str) -> (&str, Option<&str>) {
    match url.split_once('?') {
        Some((base, q)) => (base, Some(q)),
        None => (url, None),
    }
}

fn remove_dot_segments(path: &str) -> String {
    let mut out: Vec<&str> = Vec::new();
    let segments: Vec<&str> = path.split('/').collect();
    let last = segments.len().saturating_sub(1);
    for (i, segment) in segments.iter().enumerate() {
        match *segment {
            "." => {
                if i == last {
                    out.push("");
                }
            }
            ".." => {
                if out.len() > 1 {
                    out.pop();
                }
                if i == last {
                    out.push("");
                }
            }
            s => out.push(s),
        }
    }
    let joined = out.join("/");
    if joined.starts_with('/') {
        joined
    } else {
        format!("/{joined}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_location() {
        assert_eq!(
            index_url("https://charts.example.com"),
            "https://charts.example.com/index.yaml"
        );
        assert_eq!(
            index_url("https://charts.example.com/stable/"),
            "https://charts.example.com/stable/index.yaml"
        );
        assert_eq!(
            index_url("https://h/repo?token=x"),
            "https://h/repo/index.yaml?token=x"
        );
    }

    #[test]
    fn chart_urls_resolve_like_helm() {
        let repo = "https://charts.example.com/stable";
        assert_eq!(
            chart_url(repo, "podinfo-1.0.0.tgz"),
            "https://charts.example.com/stable/podinfo-1.0.0.tgz"
        );
        assert_eq!(
            chart_url(repo, "charts/podinfo-1.0.0.tgz"),
            "https://charts.example.com/stable/charts/podinfo-1.0.0.tgz"
        );
        assert_eq!(
            chart_url(repo, "../other/podinfo-1.0.0.tgz"),
            "https://charts.example.com/other/podinfo-1.0.0.tgz"
        );
        assert_eq!(
            chart_url(repo, "/dl/podinfo-1.0.0.tgz"),
            "https://charts.example.com/dl/podinfo-1.0.0.tgz"
        );
        assert_eq!(
            chart_url(repo, "https://cdn.example.net/p.tgz"),
            "https://cdn.example.net/p.tgz"
        );
        assert_eq!(
            chart_url(repo, "//cdn.example.net/p.tgz"),
            "https://cdn.example.net/p.tgz"
        );
        assert_eq!(
            chart_url("http://127.0.0.1:8080/?t=1", "p.tgz"),
            "http://127.0.0.1:8080/p.tgz?t=1"
        );
    }

    #[test]
    fn redirects_resolve_against_the_current_url() {
        assert_eq!(
            resolve_reference("http://h:1/a/b/index.yaml", "/c/index.yaml"),
            "http://h:1/c/index.yaml"
        );
        assert_eq!(
            resolve_reference("http://h:1/a/b/index.yaml", "index2.yaml"),
            "http://h:1/a/b/index2.yaml"
        );
        assert_eq!(
            resolve_reference("http://h:1", "x.tgz?sig=1"),
            "http://h:1/x.tgz?sig=1"
        );
    }
}
