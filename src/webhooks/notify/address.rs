//! A notification provider's address: a webhook URL, which is a credential (a Slack
//! webhook URL is one). An [`Address`] never prints itself, and scrubs itself from the
//! errors that quote it.

use hyper::Uri;

/// A webhook URL. Never shown: its `Debug` prints `***`.
#[derive(Clone, PartialEq, Eq)]
pub(super) struct Address {
    uri: Uri,
    text: String,
}

impl std::fmt::Debug for Address {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Address(***)")
    }
}

impl Address {
    pub(super) fn uri(&self) -> &Uri {
        &self.uri
    }

    pub(super) fn parse(text: &str) -> Option<Self> {
        let text = text.trim();
        parse_address(text).map(|uri| Self {
            uri,
            text: text.to_owned(),
        })
    }

    /// `text` with this address, and the parts of it that carry credentials (path,
    /// query, user info), replaced by `***`.
    pub(super) fn scrub(&self, text: &str) -> String {
        let mut masker = crate::helm::values::Masker::default();
        masker.add_text(&self.text);
        masker.add_text(&self.uri.to_string());
        if let Some(pq) = self.uri.path_and_query() {
            masker.add_text(pq.as_str());
            masker.add_text(pq.path());
            if let Some(q) = pq.query() {
                masker.add_text(q);
            }
        }
        if let Some(authority) = self.uri.authority()
            && let Some((userinfo, _)) = authority.as_str().rsplit_once('@')
        {
            masker.add_text(userinfo);
        }
        masker.mask(text)
    }
}

/// `text` as an `http://` or `https://` URL with a host, or none.
pub(super) fn parse_address(text: &str) -> Option<Uri> {
    let uri: Uri = text.trim().parse().ok()?;
    matches!(uri.scheme_str(), Some("http" | "https"))
        .then_some(())
        .and(uri.authority())?;
    Some(uri)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_http_urls_with_a_host_are_addresses() {
        for ok in [
            "https://hooks.slack.com/services/T0/B0/x",
            "http://127.0.0.1:8080/",
            " http://notification-controller.flux-system.svc.cluster.local./ \n",
        ] {
            assert!(Address::parse(ok).is_some(), "{ok}");
        }
        for bad in [
            "",
            "hooks.slack.com/x",
            "ftp://x/",
            "https://",
            "file:///etc/passwd",
        ] {
            assert!(Address::parse(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn an_address_never_shows_and_is_scrubbed_from_errors() {
        let a = Address::parse(
            "https://user:pa55word@hooks.example.com/services/T0/B0/s3cr3t?token=t0k3n",
        )
        .unwrap();
        assert_eq!(format!("{a:?}"), "Address(***)");
        let error = "error trying to connect to https://user:pa55word@hooks.example.com/services/T0/B0/s3cr3t?token=t0k3n: \
                     request /services/T0/B0/s3cr3t?token=t0k3n failed (path /services/T0/B0/s3cr3t, token=t0k3n, user:pa55word)";
        let scrubbed = a.scrub(error);
        for secret in ["s3cr3t", "t0k3n", "pa55word"] {
            assert!(!scrubbed.contains(secret), "{scrubbed}");
        }
        assert!(
            scrubbed.starts_with("error trying to connect to ***"),
            "{scrubbed}"
        );
    }
}
