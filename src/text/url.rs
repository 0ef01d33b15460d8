//! URLs as shown to people: the credentials a URL may carry are never shown.

/// Hides `user:password@` in a URL shown to people.
pub fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    match authority.rfind('@') {
        Some(at) => format!("{scheme}://***@{}{tail}", &authority[at + 1..]),
        None => url.to_owned(),
    }
}

/// Whether two API server addresses name the same server as a client reaches it: scheme,
/// host (case-insensitive) and port (the scheme's default when none is written) alike, the
/// path alike but for a trailing `/`. Credentials in either are ignored.
pub fn same_server(a: &str, b: &str) -> bool {
    fn parts(s: &str) -> Option<(String, String, u16, String)> {
        let u = reqwest::Url::parse(s.trim()).ok()?;
        Some((
            u.scheme().to_owned(),
            u.host_str()?.to_ascii_lowercase(),
            u.port_or_known_default()?,
            u.path().trim_end_matches('/').to_owned(),
        ))
    }
    matches!((parts(a), parts(b)), (Some(x), Some(y)) if x == y)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_server_is_the_same_however_it_is_written() {
        assert!(same_server(
            "https://API.example:443/",
            "https://api.example"
        ));
        assert!(same_server(
            "https://127.0.0.1:6443",
            "https://127.0.0.1:6443/"
        ));
        assert!(!same_server(
            "https://127.0.0.1:6443",
            "https://127.0.0.1:6444"
        ));
        assert!(!same_server("http://api.example", "https://api.example"));
        assert!(!same_server(
            "https://api.example/a",
            "https://api.example/b"
        ));
        assert!(!same_server("not a url", "not a url"));
    }

    #[test]
    fn redaction() {
        assert_eq!(
            redact("https://bob:s3cret@h.example/x?y"),
            "https://***@h.example/x?y"
        );
        assert_eq!(redact("https://h.example/a@b"), "https://h.example/a@b");
    }
}
