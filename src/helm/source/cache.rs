//! The on-disk cache of downloaded chart archives. A file is only ever created complete
//! (written to a temporary name, synced, then renamed), so a process killed mid-download
//! leaves at most a stray temporary file, which a later start sweeps away.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use sha2::{Digest, Sha256};

const TEMP_SUFFIX: &str = ".part";
/// Temporary files older than this belong to a dead process (a download is bounded by
/// the request timeout, far below this).
const STALE_AFTER: Duration = Duration::from_secs(3600);

/// Where a chart version lives in the cache: keyed by repository, name, version and
/// digest (or the index's `created` time when it has no digest), so a version that is
/// republished with different content gets its own file.
pub fn chart_path(
    cache_dir: &Path,
    repository: &str,
    name: &str,
    version: &str,
    identity: &str,
) -> PathBuf {
    let mut hasher = Sha256::new();
    for part in [repository.trim_end_matches('/'), name, version, identity] {
        hasher.update(part.as_bytes());
        hasher.update([0u8]);
    }
    let key = hex::encode(hasher.finalize());
    // The readable prefix is for people looking at the directory; the key decides.
    cache_dir.join(format!(
        "{}-{}-{}.tgz",
        sanitize(name),
        sanitize(version),
        &key[..32]
    ))
}

fn sanitize(text: &str) -> String {
    text.chars()
        .take(64)
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '+' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// Writes `data` to `path` atomically (same-directory temporary file + rename).
pub fn write_atomic(path: &Path, data: &[u8]) -> std::io::Result<()> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let dir = path.parent().unwrap_or(Path::new("."));
    fs::create_dir_all(dir)?;
    let file_name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let nanos = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let temp = dir.join(format!(
        ".{file_name}.{}.{nanos}.{}{TEMP_SUFFIX}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let result = (|| {
        let mut file = fs::File::create(&temp)?;
        file.write_all(data)?;
        file.sync_all()?;
        fs::rename(&temp, path)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&temp);
    }
    result
}

/// Removes temporary files left by killed processes. Best effort.
pub fn sweep_stale_temporaries(cache_dir: &Path) {
    let Ok(entries) = fs::read_dir(cache_dir) else {
        return;
    };
    let now = SystemTime::now();
    for entry in entries.flatten() {
        let name = entry.file_name();
        if !name.to_string_lossy().ends_with(TEMP_SUFFIX) {
            continue;
        }
        let stale = entry
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|modified| now.duration_since(modified).ok())
            .is_some_and(|age| age > STALE_AFTER);
        if stale {
            let _ = fs::remove_file(entry.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_separate_repositories_versions_and_digests() {
        let dir = Path::new("/cache");
        let a = chart_path(dir, "https://a.example", "app", "1.0.0", "d1");
        assert_eq!(
            a,
            chart_path(dir, "https://a.example/", "app", "1.0.0", "d1")
        );
        assert_ne!(
            a,
            chart_path(dir, "https://b.example", "app", "1.0.0", "d1")
        );
        assert_ne!(
            a,
            chart_path(dir, "https://a.example", "app", "1.0.1", "d1")
        );
        assert_ne!(
            a,
            chart_path(dir, "https://a.example", "app", "1.0.0", "d2")
        );
        let name = a.file_name().unwrap().to_string_lossy().into_owned();
        assert!(
            name.starts_with("app-1.0.0-") && name.ends_with(".tgz"),
            "{name}"
        );
        let odd = chart_path(dir, "r", "../x", "1/2", "");
        assert_eq!(odd.parent(), Some(dir));
    }

    #[test]
    fn atomic_write_leaves_only_the_final_file() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("sub/chart.tgz");
        write_atomic(&target, b"one").unwrap();
        write_atomic(&target, b"two").unwrap();
        assert_eq!(fs::read(&target).unwrap(), b"two");
        let names: Vec<_> = fs::read_dir(dir.path().join("sub"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["chart.tgz"]);
    }

    #[test]
    fn sweep_removes_only_old_temporaries() {
        let dir = tempfile::tempdir().unwrap();
        let old = dir.path().join(".a.tgz.1.2.3.part");
        let fresh = dir.path().join(".b.tgz.1.2.4.part");
        let chart = dir.path().join("a.tgz");
        for p in [&old, &fresh, &chart] {
            fs::write(p, b"x").unwrap();
        }
        let past = SystemTime::now() - Duration::from_secs(7200);
        fs::File::options()
            .write(true)
            .open(&old)
            .unwrap()
            .set_modified(past)
            .unwrap();
        fs::File::options()
            .write(true)
            .open(&chart)
            .unwrap()
            .set_modified(past)
            .unwrap();
        sweep_stale_temporaries(dir.path());
        assert!(!old.exists());
        assert!(fresh.exists());
        assert!(chart.exists());
    }
}
