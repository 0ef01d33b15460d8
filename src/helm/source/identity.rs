//! Whose a cached source's content is: content fetched for one release is reused for
//! another only when the other's own location and credentials would have fetched it
//! (docs/operations/multi-tenancy.md, "Caches"). A Git checkout and an OCI chart layer
//! are kept under a key made of the normalised location and the credentials, so a
//! tenant who names another's commit or layer digest from another place, or with other
//! (or no) credentials, misses the cache and must fetch it from its own source.
//!
//! The key is an HMAC with a random key kept beside the cache (0600): a directory name
//! proves nothing about the credentials to whoever can list the cache.

use std::path::Path;

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

use super::{Error, RepoAuth};

/// The cache's own key file.
const KEY_FILE: &str = ".identity-key";

/// The secret that makes source identities unguessable; one per cache directory.
#[derive(Clone)]
pub struct IdentityKey([u8; 32]);

impl std::fmt::Debug for IdentityKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("IdentityKey(<redacted>)")
    }
}

impl IdentityKey {
    /// The key of the cache at `dir`, made on first use (random, written 0600).
    pub fn load_or_create(dir: &Path) -> Result<Self, Error> {
        let path = dir.join(KEY_FILE);
        let io = |source| Error::Cache {
            path: path.clone(),
            source,
        };
        match std::fs::read(&path) {
            Ok(bytes) if bytes.len() == 32 => {
                let mut key = [0u8; 32];
                key.copy_from_slice(&bytes);
                return Ok(Self(key));
            }
            Ok(_) => {
                tracing::warn!(path = %path.display(), "the chart cache's identity key is damaged; making a new one (cached sources are fetched again)")
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io(e)),
        }
        let key = random_key().map_err(io)?;
        write_private(&path, &key).map_err(io)?;
        // Two processes on one cache may both have made one: the file decides.
        let written = std::fs::read(&path).map_err(io)?;
        let mut out = [0u8; 32];
        if written.len() == 32 {
            out.copy_from_slice(&written);
        } else {
            out = key;
        }
        Ok(Self(out))
    }

    /// A key for tests and for engines without a cache directory of their own.
    #[cfg(test)]
    pub fn fixed(byte: u8) -> Self {
        Self([byte; 32])
    }

    /// The identity of `location` reached with `credentials` (each an opaque byte
    /// string), as 32 hex digits.
    pub fn identity(&self, location: &str, credentials: &[&[u8]]) -> String {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.0).expect("HMAC takes any key");
        for part in std::iter::once(location.as_bytes()).chain(credentials.iter().copied()) {
            mac.update(&(part.len() as u64).to_le_bytes());
            mac.update(part);
        }
        hex::encode(&mac.finalize().into_bytes()[..16])
    }

    /// The identity of a Git repository reached with `auth`'s Git credentials.
    pub fn git(&self, location: &str, auth: &RepoAuth) -> String {
        let opt = |s: &Option<String>| s.as_deref().unwrap_or_default().as_bytes().to_vec();
        let parts = [
            opt(&auth.username),
            opt(&auth.password),
            opt(&auth.bearer_token),
            opt(&auth.ssh_identity),
            opt(&auth.known_hosts),
            auth.ca_pem.clone().unwrap_or_default(),
        ];
        let refs: Vec<&[u8]> = parts.iter().map(Vec::as_slice).collect();
        self.identity(location, &refs)
    }

    /// The identity of an OCI repository (`registry/repository`) reached with
    /// `auth`'s credentials for its registry.
    pub fn oci(&self, registry: &str, repository: &str, auth: &RepoAuth) -> String {
        let (user, password) = auth.registry_basic(registry).unwrap_or_default();
        let location = format!("{}/{repository}", registry.to_ascii_lowercase());
        self.identity(
            &location,
            &[
                user.as_bytes(),
                password.as_bytes(),
                auth.ca_pem.as_deref().unwrap_or_default(),
            ],
        )
    }
}

fn random_key() -> std::io::Result<[u8; 32]> {
    use ring::rand::SecureRandom;
    let mut key = [0u8; 32];
    ring::rand::SystemRandom::new()
        .fill(&mut key)
        .map_err(|_| std::io::Error::other("the system's random source failed"))?;
    Ok(key)
}

/// Writes `data` to `path` readable by its owner only, unless the file exists.
fn write_private(path: &Path, data: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    match options.open(path) {
        Ok(mut file) => {
            file.write_all(data)?;
            file.sync_all()
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identities_separate_locations_and_credentials() {
        let key = IdentityKey::fixed(7);
        let none = RepoAuth::default();
        let creds = RepoAuth {
            username: Some("b".into()),
            password: Some("token-b".into()),
            ..RepoAuth::default()
        };
        let url = "https://git.example/b/charts";
        assert_eq!(key.git(url, &none), key.git(url, &none));
        assert_ne!(key.git(url, &none), key.git(url, &creds));
        assert_ne!(
            key.git(url, &creds),
            key.git("https://nonexistent.invalid/x", &creds)
        );
        let bearer = RepoAuth {
            bearer_token: Some("token-b".into()),
            ..RepoAuth::default()
        };
        assert_ne!(key.git(url, &bearer), key.git(url, &creds));
        // Another cache's key gives other names for the same source.
        assert_ne!(IdentityKey::fixed(8).git(url, &creds), key.git(url, &creds));
        assert!(!key.git(url, &creds).contains("token"));

        let reg = key.oci("registry.example", "b/app", &none);
        assert_ne!(reg, key.oci("other.example", "b/app", &none));
        assert_ne!(reg, key.oci("registry.example", "a/app", &none));
        assert_ne!(reg, key.oci("registry.example", "b/app", &creds));
        assert_eq!(reg, key.oci("Registry.Example", "b/app", &none));
    }

    #[test]
    fn the_key_is_made_once_and_private() {
        let dir = tempfile::tempdir().unwrap();
        let a = IdentityKey::load_or_create(dir.path()).unwrap();
        let b = IdentityKey::load_or_create(dir.path()).unwrap();
        assert_eq!(a.0, b.0);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(dir.path().join(KEY_FILE))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
    }
}
