//! Namespace favourites, as k9s keeps them: per kubeconfig context, the namespaces the
//! dashboard showed, on the number keys `1`..`9` (`0` is every namespace). A namespace
//! takes the next free number and keeps it, so the keys stay where the fingers learnt
//! them when another is added; once all nine are taken, a new one takes key 9 (the
//! others still keep theirs).
//!
//! Kept across runs in `<config dir>/favourites.yaml`:
//!
//! ```yaml
//! contexts:
//!   prod-eu: [apps, data, monitoring]
//! ```
//!
//! A file that cannot be read or written is reported on the status line; the dashboard
//! then keeps the list for the session only.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

/// Favourites per context (the number keys `1`..`9`).
pub const MAX: usize = 9;

/// The file's name in the config directory.
pub const FILE: &str = "favourites.yaml";

const HEADER: &str = "# Namespaces the wheelhouse dashboard showed, per kubeconfig context, in the order\n\
# of their keys: 1-9 switch to them, 0 shows every namespace. Written by wheelhouse;\n\
# safe to edit or delete.\n";

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Favourites {
    #[serde(default)]
    pub contexts: BTreeMap<String, Vec<String>>,
}

impl Favourites {
    /// The favourites of a context, key `1` first.
    pub fn of(&self, context: &str) -> &[String] {
        self.contexts.get(context).map_or(&[], Vec::as_slice)
    }

    /// Notes that `namespace` is in view on `context`. Returns whether the list changed.
    pub fn visit(&mut self, context: &str, namespace: &str) -> bool {
        let list = self.contexts.entry(context.to_owned()).or_default();
        if list.iter().any(|n| n == namespace) {
            return false;
        }
        if list.len() == MAX {
            list[MAX - 1] = namespace.to_owned();
        } else {
            list.push(namespace.to_owned());
        }
        true
    }

    /// Reads `<dir>/favourites.yaml`; none yet is an empty list.
    pub fn load(dir: &Path) -> Result<Self, String> {
        let path = dir.join(FILE);
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Self::default()),
            Err(e) => return Err(format!("{}: {e}", path.display())),
        };
        let mut favourites: Self = crate::text::yaml::from_str::<Option<Self>>(&text)
            .map_err(|e| format!("{}: {e}", path.display()))?
            .unwrap_or_default();
        for list in favourites.contexts.values_mut() {
            let mut seen = std::collections::BTreeSet::new();
            list.retain(|n| !n.is_empty() && seen.insert(n.clone()));
            list.truncate(MAX);
        }
        Ok(favourites)
    }

    /// Writes `<dir>/favourites.yaml` (through a temporary file, so a crash mid-write
    /// never leaves half a file).
    pub fn save(&self, dir: &Path) -> Result<(), String> {
        let path = dir.join(FILE);
        let fail = |e: &dyn std::fmt::Display| format!("{}: {e}", path.display());
        std::fs::create_dir_all(dir).map_err(|e| fail(&e))?;
        let body = crate::text::yaml::to_string(self);
        let tmp = dir.join(format!(".{FILE}.tmp"));
        std::fs::write(&tmp, format!("{HEADER}{body}")).map_err(|e| fail(&e))?;
        std::fs::rename(&tmp, &path).map_err(|e| fail(&e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_favourite_keeps_its_number_when_another_is_added() {
        let mut f = Favourites::default();
        assert!(f.visit("prod", "apps"));
        assert!(f.visit("prod", "data"));
        assert!(f.visit("staging", "apps"));
        assert_eq!(f.of("prod"), ["apps", "data"]);
        // Already listed: stays where it is.
        assert!(!f.visit("prod", "apps"));
        assert_eq!(f.of("prod"), ["apps", "data"]);
        for i in 0..10 {
            f.visit("prod", &format!("ns{i}"));
        }
        // Full: keys 1-8 never moved; the newest takes 9.
        assert_eq!(f.of("prod").len(), MAX);
        assert_eq!(f.of("prod")[..3], ["apps", "data", "ns0"]);
        assert_eq!(f.of("prod")[MAX - 1], "ns9");
        assert_eq!(f.of("staging"), ["apps"]);
        assert!(f.of("nowhere").is_empty());
    }

    #[test]
    fn round_trips_through_the_file_and_reports_what_it_cannot_read() {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("wheelhouse");
        assert_eq!(Favourites::load(&config).unwrap(), Favourites::default());
        let mut f = Favourites::default();
        f.visit("prod", "apps");
        f.visit("prod", "data");
        f.save(&config).unwrap();
        let text = std::fs::read_to_string(config.join(FILE)).unwrap();
        assert!(text.starts_with("# Namespaces"), "{text}");
        assert_eq!(Favourites::load(&config).unwrap(), f);
        // Hand-edited: duplicates and blanks go, the rest stays in order.
        std::fs::write(config.join(FILE), "contexts:\n  prod: [a, b, a, '', c]\n").unwrap();
        assert_eq!(
            Favourites::load(&config).unwrap().of("prod"),
            ["a", "b", "c"]
        );
        std::fs::write(config.join(FILE), "").unwrap();
        assert_eq!(Favourites::load(&config).unwrap(), Favourites::default());
        std::fs::write(config.join(FILE), "contexts: [oops\n").unwrap();
        let err = Favourites::load(&config).unwrap_err();
        assert!(err.contains(FILE), "{err}");
        // A config "directory" that is a file cannot be written.
        let file = dir.path().join("plain-file");
        std::fs::write(&file, "").unwrap();
        assert!(f.save(&file).unwrap_err().contains(FILE));
    }
}
