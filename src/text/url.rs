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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redaction() {
        assert_eq!(
            redact("https://bob:s3cret@h.example/x?y"),
            "https://***@h.example/x?y"
        );
        assert_eq!(redact("https://h.example/a@b"), "https://h.example/a@b");
    }
}
